"""convert --from an evaluation set (ImageNetV2, ImageNet-A, ImageNet-R, ImageNet-Sketch): a validation split of its
images, each once, bytes untouched, with its class folder's 1000-class label; the same bytes from the archive and
from its extracted folder; a partial copy and a foreign file refused in one line."""

import io
import json
import shutil
import tarfile
import zipfile

import pytest

from conftest import SAMPLE, run_cli, shard_files
from helpers import archive_members, expect_error, user_copy_of
from imagenet_build.catalog.classes import DEFAULT_METADATA_FILE, read_metadata_file
from imagenet_build.format.record_schema import decode_example
from imagenet_build.format.tfrecord import read_records
from imagenet_build.sources.copies import sample_kinds
from imagenet_build.tools.sample_dataset import make_sample

ARCHIVES = {"imagenet-v2": "imagenetv2-matched-frequency.tar.gz", "imagenet-a": "imagenet-a.tar",
            "imagenet-r": "imagenet-r.tar", "imagenet-sketch": "ImageNet-Sketch.zip"}  # what `sample` writes
SETS = list(ARCHIVES)
TOPS = {"imagenet-v2": "imagenetv2-matched-frequency-format-val", "imagenet-a": "imagenet-a",
        "imagenet-r": "imagenet-r", "imagenet-sketch": "sketch"}
SHARDS = ["--validation-shards", 2, "--layout-threads", 2, "--workers", 1]


def test_the_four_sets_are_registered_with_their_counts():
    assert SETS == [short for short, kind in sample_kinds().items() if getattr(kind, "evaluation", False)]
    from imagenet_build.verify.label_checks import expected_classes, expected_totals

    for short, (images, classes) in {"imagenet-v2": (10000, 1000), "imagenet-a": (7500, 200),
                                     "imagenet-r": (30000, 200), "imagenet-sketch": (50889, 1000)}.items():
        manifest = {"inputs": {"source": {"layout": sample_kinds()[short].name}}, "options": {}}
        assert expected_totals(manifest)[0] == {"validation": images}
        assert expected_classes(manifest) == classes


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """set -> its sample, and the same archive extracted beside it (extracted/<top folder>)."""
    made = {}

    def get(kind):
        if kind not in made:
            root = tmp_path_factory.mktemp(kind)
            make_sample(root / "copy", kind=kind, **SAMPLE)
            archive = root / "copy" / ARCHIVES[kind]
            if archive.suffix == ".zip":
                with zipfile.ZipFile(archive) as z:
                    z.extractall(root / "extracted")
            else:
                with tarfile.open(archive) as tar:
                    tar.extractall(root / "extracted")
            made[kind] = root
        return made[kind]

    return get


def convert(source, labels, out, *more):
    result = run_cli("convert", "--from", source, "--labels-file", labels, "--output-dir", out, *SHARDS, *more,
                     "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def records(out):
    found = []
    for shard in sorted(out.glob("*-of-*")):
        assert shard.name.startswith("validation-"), shard.name
        data = shard.read_bytes()
        found.extend(decode_example(payload) for _, payload, _ in read_records(io.BytesIO(data), len(data)))
    return found


@pytest.mark.parametrize("kind", SETS)
def test_the_archive_and_its_extracted_folder_give_the_same_bytes(written, tmp_path, kind):
    root = written(kind)
    labels = root / "copy" / "labels.txt"
    from_archive = convert(root / "copy" / ARCHIVES[kind], labels, tmp_path / "archive")
    from_folder = convert(root / "extracted" / TOPS[kind], labels, tmp_path / "folder")
    assert from_archive["found"].endswith("archive: 16 validation") and from_folder["found"].endswith(
        "folder: 16 validation"), (from_archive["found"], from_folder["found"])
    assert shard_files(tmp_path / "archive") == shard_files(tmp_path / "folder")
    holding = convert(root / "extracted", labels, tmp_path / "holding")  # the folder it was extracted into
    assert shard_files(tmp_path / "holding") == shard_files(tmp_path / "folder"), holding


@pytest.mark.parametrize("kind", SETS)
def test_every_image_once_with_its_synsets_1000_class_label_and_its_bytes(written, tmp_path, kind):
    """Each file of the set is one record: image/filename its path below the top folder, the 1000-class label of
    its class folder's synset (the shipped labels file's line; the sample's labels.txt is its first lines), the
    synset's text from the shipped metadata, its bytes untouched."""
    from imagenet_build.sources.eval_sets import sorted_synsets

    root = written(kind)
    summary = convert(root / "extracted" / TOPS[kind], root / "copy" / "labels.txt", tmp_path / "out")
    assert summary["splits"]["validation"]["records"] == 16
    files = {str(p.relative_to(root / "extracted" / TOPS[kind])): p.read_bytes()
             for p in (root / "extracted" / TOPS[kind]).glob("*/*")}
    texts = read_metadata_file(DEFAULT_METADATA_FILE)
    got = records(tmp_path / "out")
    assert sorted(r["image/filename"][0].decode() for r in got) == sorted(files)
    for r in got:
        name = r["image/filename"][0].decode()
        folder = name.split("/")[0]
        synset = sorted_synsets()[int(folder)] if kind == "imagenet-v2" else folder
        assert r["image/class/synset"] == [synset.encode()]
        assert r["image/class/label"] == [sorted_synsets().index(synset) + 1]
        assert r["image/class/text"] == [texts[synset].encode()]
        assert r["image/encoded"] == [files[name]]


@pytest.mark.parametrize("kind", ["imagenet-a", "imagenet-r"])
def test_a_fixed_subset_keeps_the_1000_class_labels_and_records_them(written, tmp_path, kind):
    """With the shipped 1000-class labels file: labels as the ILSVRC build gives them, never renumbered to 200,
    and the manifest lists the set's classes' labels (here the sample's 4 classes are a partial copy of the 200:
    built with --on-error skip, the other classes named)."""
    import importlib

    from imagenet_build.sources.eval_sets import sorted_synsets

    root = written(kind)
    convert(root / "copy", root / "copy" / "labels.txt", tmp_path / "small")
    manifest = json.loads((tmp_path / "small" / "manifest.json").read_text())
    labels = manifest["inputs"]["source"]["labels"]
    assert labels == sorted({r["image/class/label"][0] for r in records(tmp_path / "small")}) and len(labels) == 4
    partial = user_copy_of(root / "copy", tmp_path / "partial")  # a user's: no note naming the sample's labels
    expect_error(["convert", "--from", partial, "--output-dir", tmp_path / "o", *SHARDS], 1,
                 ARCHIVES[kind], "no class folder for 196 of", "200 classes", "a partial copy")
    result = run_cli("convert", "--from", partial, "--output-dir", tmp_path / "full", *SHARDS, "--on-error",
                     "skip", "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert any("196 of" in note and "have no class folder" in note for note in summary["notes"]), summary["notes"]
    full = json.loads((tmp_path / "full" / "manifest.json").read_text())
    assert len(full["inputs"]["source"]["labels"]) == 200 and full["num_classes"] == 1000
    assert [r["image/class/label"] for r in records(tmp_path / "full")] == \
        [r["image/class/label"] for r in records(tmp_path / "small")]  # the labels file's prefix: the same labels
    classes = importlib.import_module(f"imagenet_build.sources.{kind.replace('-', '_')}").CLASSES
    assert full["inputs"]["source"]["labels"] == [index + 1 for index in classes]  # the project's own list
    assert [sorted_synsets()[label - 1] for label in labels] == [sorted_synsets()[i] for i in classes[:4]]


@pytest.mark.parametrize("kind", SETS)
@pytest.mark.parametrize("form", ["archive", "folder"])
def test_a_foreign_file_and_a_partial_copy_are_one_line(written, tmp_path, kind, form):
    """A file that is no image of a class folder (a stray note beside the class folders, a file outside the top
    folder) and a class folder missing: refused naming it; --on-error skip leaves the stray file out, listed."""
    from helpers import tar_of
    from imagenet_build.sources.zips import DEFLATED, write_zip

    root = written(kind)
    labels = root / "copy" / "labels.txt"
    top = TOPS[kind]
    for stray, named in ((f"{top}/notes.txt", f"{top}/notes.txt"), ("other/notes.txt", "other/notes.txt")):
        copy = tmp_path / stray.replace("/", "-")
        if form == "folder":
            if stray.startswith("other"):
                continue  # a folder's files outside the top folder are not the set's: --from names the top folder
            shutil.copytree(root / "extracted", copy)
            (copy / stray).write_text("hello")
            source = copy / top
        else:
            copy.mkdir()
            source = copy / ARCHIVES[kind]
            members = archive_members(root / "copy" / ARCHIVES[kind]) + [(stray, b"hello")]
            if source.suffix == ".zip":
                write_zip(source, [(n, d, DEFLATED, False) for n, d in members])
            else:
                data = tar_of(members)
                source.write_bytes(__import__("gzip").compress(data, mtime=0) if source.name.endswith(".gz") else data)
        expect_error(["convert", "--from", source, "--labels-file", labels, "--output-dir", copy / "o", *SHARDS], 1,
                     named, "a foreign file")
        skipped = run_cli("convert", "--from", source, "--labels-file", labels, "--output-dir", copy / "s",
                          *SHARDS, "--on-error", "skip", "--json")
        assert skipped.exit_code == 0, skipped.output
        assert any(named.endswith(left["file"]) for left in json.loads(skipped.stdout)["skipped"])
    if form == "folder":  # a class folder gone from the extracted folder (the archive's: the damage suite)
        partial = tmp_path / "partial"
        shutil.copytree(root / "extracted", partial)
        gone = sorted(p for p in (partial / top).iterdir() if p.is_dir())[1]
        shutil.rmtree(gone)
        expect_error(["convert", "--from", partial / top, "--labels-file", labels, "--output-dir", partial / "o",
                      *SHARDS], 1, str(partial / top), "no class folder for 1 of", gone.name, "a partial copy")


def test_imagenet_v2_knows_its_three_variants_and_takes_one(written, tmp_path):
    from imagenet_build.sources import find_copy

    root = written("imagenet-v2")
    names = ["imagenetv2-matched-frequency.tar.gz", "imagenetv2-threshold0.7.tar.gz", "imagenetv2-top-images.tar.gz"]
    for name, variant in zip(names, ["matched-frequency", "threshold-0.7", "top-images"]):
        shutil.copy(root / "copy" / names[0], tmp_path / name)
        assert find_copy([tmp_path / name]).description == f"ImageNetV2 {variant} archive"
    expect_error(["convert", "--from", tmp_path / names[0], "--from", tmp_path / names[2], "--output-dir",
                  tmp_path / "o"], 2, "2 variants of ImageNetV2", "matched-frequency, top-images")


def test_a_png_and_a_cmyk_image_are_reencoded_without_slims_ilsvrc_notes(written, tmp_path):
    """images.md's rule, as for every copy: a PNG behind a .jpg name and a CMYK JPEG are stored re-encoded, the
    others untouched; slim's lists of ILSVRC2012 files to re-encode name no file of the set, so no note says
    one is missing from them (built with the shipped 1000 classes: --on-error skip for the sample's 196 absent)."""
    from PIL import Image

    from helpers import tar_of

    members = archive_members(written("imagenet-a") / "copy" / "imagenet-a.tar")
    images = [i for i, (name, _) in enumerate(members) if name.endswith(".jpg")]
    png, cmyk = io.BytesIO(), io.BytesIO()
    Image.new("RGB", (40, 30), (200, 10, 10)).save(png, "PNG")
    Image.new("CMYK", (40, 30), (0, 200, 200, 0)).save(cmyk, "JPEG")
    members[images[0]] = (members[images[0]][0], png.getvalue())
    members[images[1]] = (members[images[1]][0], cmyk.getvalue())
    (tmp_path / "imagenet-a.tar").write_bytes(tar_of(members))
    result = run_cli("convert", "--from", tmp_path / "imagenet-a.tar", "--output-dir", tmp_path / "out", *SHARDS,
                     "--on-error", "skip", "--json")
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    reencoded = [r for shard in manifest["shards"] for r in shard["reencoded"]]
    changed = {members[i][0].split("/", 1)[1] for i in images[:2]}
    assert {r["file"] for r in reencoded} == changed and all(r["reencoded"] and not r["note"] for r in reencoded)
    stored = {r["image/filename"][0].decode(): r["image/encoded"][0] for r in records(tmp_path / "out")}
    assert all(stored[name.split("/", 1)[1]] == data for name, data in members
               if name.endswith(".jpg") and name.split("/", 1)[1] not in changed)


def test_the_docs_list_each_fixed_subsets_classes_as_the_code_holds_them():
    import re
    from pathlib import Path

    from imagenet_build.sources.imagenet_a import IMAGENET_A
    from imagenet_build.sources.imagenet_r import IMAGENET_R

    text = (Path(__file__).parents[2] / "docs" / "eval-sets.md").read_text()
    for the_set in (IMAGENET_A, IMAGENET_R):
        listed = text.split(f"\n{the_set.name}:\n\n", 1)[1].split("\n\n", 1)[0]
        assert tuple(re.findall(r"`(n\d{8})`", listed)) == the_set.synsets and len(the_set.synsets) == 200


def _write_archive(path, members):
    """The set's archive of [(name, bytes or None for a folder)] at `path`: a zip, a .tar.gz or a .tar, as named."""
    import gzip

    from helpers import tar_of
    from imagenet_build.sources.zips import DEFLATED, write_zip

    if path.suffix == ".zip":
        write_zip(path, [(n + "/" if d is None else n, d or b"", DEFLATED, False) for n, d in members])
    else:
        data = tar_of(members)
        path.write_bytes(gzip.compress(data, mtime=0) if path.name.endswith(".gz") else data)


def test_imagenet_v2s_variant_is_the_one_its_archive_holds_not_its_name(written, tmp_path):
    """A renamed archive of another variant is refused naming what it holds; the name it should have converts."""
    root = written("imagenet-v2")
    renamed = tmp_path / "imagenetv2-threshold0.7.tar.gz"
    shutil.copy(root / "copy" / ARCHIVES["imagenet-v2"], renamed)
    expect_error(["convert", "--from", renamed, "--output-dir", tmp_path / "o", *SHARDS], 1, str(renamed),
                 "holds imagenetv2-matched-frequency-format-val/, ImageNetV2's matched-frequency variant, but its "
                 "name says threshold-0.7", "name it imagenetv2-matched-frequency.tar.gz")
    assert not (tmp_path / "o").exists() or not list((tmp_path / "o").glob("validation-*"))


@pytest.mark.parametrize("kind", SETS)
def test_an_archive_whose_top_folder_is_not_the_sets_or_with_none_is_refused_naming_it(written, tmp_path, kind):
    """A top folder the set's archives never have (something-else/), and loose class folders with no top folder
    at all: each one line naming the archive, nothing built."""
    root = written(kind)
    labels = root / "copy" / "labels.txt"
    members = archive_members(root / "copy" / ARCHIVES[kind])
    top = TOPS[kind]
    for case, renamed, fragments in (
            ("other", [("something-else/" + n.split("/", 1)[1], d) for n, d in members],
             [f"{ARCHIVES[kind]}:something-else/", "a top folder none of", "not "]),
            ("class folders", [(n.split("/", 1)[1], d) for n, d in members],
             [ARCHIVES[kind], "holds its class folders (", "at its top, not in a top folder"]),
            ("loose", [(n.rsplit("/", 1)[1], d) for n, d in members if n.count("/") == 2],
             [ARCHIVES[kind], "holds no <top folder>/<class>/<image> files"])):
        (tmp_path / case).mkdir()
        archive = tmp_path / case / ARCHIVES[kind]
        _write_archive(archive, renamed)
        expect_error(["convert", "--from", archive, "--labels-file", labels, "--output-dir", tmp_path / case / "o",
                      *SHARDS], 1, *fragments)
        assert top not in str(renamed[0][0])


@pytest.mark.parametrize("top", ["imagenetv2-matched-frequency", "imagenetv2-matched-frequency-format-val"])
def test_tfds_2020s_imagenet_v2_folder_converts_as_its_archive_does(written, tmp_path, top):
    """TFDS's builder before 1.0.0 extracted the archive to `imagenetv2-matched-frequency/` (no -format-val): that
    folder, a folder holding it, and an archive holding it give the shards of the archive as shipped."""
    root = written("imagenet-v2")
    labels = root / "copy" / "labels.txt"
    expected = tmp_path / "expected"
    convert(root / "copy" / ARCHIVES["imagenet-v2"], labels, expected)
    holder = tmp_path / "holder"
    shutil.copytree(root / "extracted" / TOPS["imagenet-v2"], holder / top)
    shipped = archive_members(root / "copy" / ARCHIVES["imagenet-v2"])
    _write_archive(tmp_path / ARCHIVES["imagenet-v2"], [(top + "/" + n.split("/", 1)[1], d) for n, d in shipped])
    for n, source in enumerate((holder / top, holder, tmp_path / ARCHIVES["imagenet-v2"])):
        found = convert(source, labels, tmp_path / f"out{n}")
        assert found["found"].startswith("ImageNetV2 matched-frequency"), found["found"]
        assert shard_files(tmp_path / f"out{n}") == shard_files(expected)


@pytest.mark.parametrize("form", ["archive", "folder"])
def test_an_empty_class_folder_is_said_to_be_empty_not_missing(written, tmp_path, form):
    """ImageNet-A with one class folder there but empty (a folder member in the archive, a folder on disk): one
    line saying so; with --on-error skip, left out as empty; a folder gone is still "no class folder"."""
    root = written("imagenet-a")
    labels = root / "copy" / "labels.txt"
    members = archive_members(root / "copy" / "imagenet-a.tar")
    folders = sorted({n.split("/")[1] for n, _ in members if n.count("/") == 2})
    emptied = [(n, d) for n, d in members if n.split("/")[1:2] != [folders[1]]]
    if form == "archive":
        source = tmp_path / "imagenet-a.tar"
        _write_archive(source, [("imagenet-a", None), (f"imagenet-a/{folders[1]}", None)] + emptied)
    else:
        shutil.copytree(root / "extracted", tmp_path / "x")
        source = tmp_path / "x" / "imagenet-a"
        for image in (source / folders[1]).iterdir():
            image.unlink()
    expect_error(["convert", "--from", source, "--labels-file", labels, "--output-dir", tmp_path / "o", *SHARDS], 1,
                 "an empty class folder for 1 of ImageNet-A's 200 classes", folders[1], "a partial copy")
    skipped = run_cli("convert", "--from", source, "--labels-file", labels, "--output-dir", tmp_path / "s", *SHARDS,
                      "--on-error", "skip", "--json")
    assert skipped.exit_code == 0, skipped.output
    report = json.loads(skipped.stdout)
    assert {"file": f"{folders[1]}/", "reason": "class folder empty: a partial copy", "split": "validation"} in \
        report["skipped"]
    assert any(f"have an empty class folder: {folders[1]}" in note for note in report["notes"]), report["notes"]
    if form == "folder":
        (source / folders[2]).rename(tmp_path / "gone")
        expect_error(["convert", "--from", source, "--labels-file", labels, "--output-dir", tmp_path / "o2",
                      *SHARDS], 1, "no class folder, or an empty one, for 2 of", folders[2])


@pytest.mark.parametrize("kind", SETS)
def test_a_members_error_names_it_as_the_archive_does_top_folder_included(written, tmp_path, kind):
    """An image that is no image, read by a worker: the line names archive:top/class/name (A's and R's too)."""
    root = written(kind)
    members = archive_members(root / "copy" / ARCHIVES[kind])
    broken = next(n for n, _ in members if n.lower().endswith((".jpg", ".jpeg")))
    source = tmp_path / ARCHIVES[kind]
    _write_archive(source, [(n, b"not an image at all" if n == broken else d) for n, d in members])
    expect_error(["convert", "--from", source, "--labels-file", root / "copy" / "labels.txt", "--output-dir",
                  tmp_path / "o", *SHARDS], 1, f"{source}:{broken}:")


def test_an_archive_and_a_folder_given_for_one_set_are_refused_one_beside_the_other_noted(written, tmp_path):
    """copies.md: one split given twice (its archive and its extracted folder) is refused; a folder holding both
    reads the archive and names the folder it left unread."""
    root = written("imagenet-a")
    holder = tmp_path / "holder"
    shutil.copytree(root / "extracted", holder)
    shutil.copy(root / "copy" / "imagenet-a.tar", holder)
    shutil.copytree(root / "extracted", tmp_path / "other")
    for given in ([holder / "imagenet-a.tar", tmp_path / "other" / "imagenet-a"],
                  [holder / "imagenet-a.tar", holder / "imagenet-a"], [holder, tmp_path / "other" / "imagenet-a"]):
        expect_error(["convert", *[a for path in given for a in ("--from", path)], "--output-dir", tmp_path / "o",
                      *SHARDS], 2, "--from was given ImageNet-A's validation split twice",
                     str(holder / "imagenet-a.tar"), str(given[1]))
    found = convert(holder, root / "copy" / "labels.txt", tmp_path / "out")
    note = f"{holder / 'imagenet-a'} not read: the archive {holder / 'imagenet-a.tar'} beside it is"
    assert note in found["notes"][0]


def test_the_validation_labels_file_given_for_an_evaluation_set_is_noted_unused(written, tmp_path):
    root = written("imagenet-a")
    given = root / "copy" / "labels.txt"  # any file: it is not read
    found = convert(root / "copy" / "imagenet-a.tar", given, tmp_path / "out", "--validation-labels-file", given)
    assert f"--validation-labels-file {given} not used: ImageNet-A archive is labelled by its class folders" in \
        found["notes"][0]
    assert not any("--validation-labels-file" in n for n in convert(root / "copy" / "imagenet-a.tar", given,
                                                                    tmp_path / "out2")["notes"])
