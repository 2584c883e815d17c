"""What every evaluation set is held to (sources/eval_sets.py), rule by rule: how a set registers, which files of
its archive are images, foreign or shipped beside them, what its listing records, what its sample writer makes.
The convert of each set as a whole: test_source_eval_sets.py."""

import gzip
import json
import os
import shutil
import tarfile
import zipfile
from collections import Counter

import pytest

from conftest import SAMPLE, run_cli
from helpers import archive_members, expect_error, tar_of
from imagenet_build.infra.errors import BuildError
from imagenet_build.sources.eval_sets import (
    EvalCopy,
    EvalSet,
    assemble_set,
    identify_set,
    register_set,
    sorted_synsets,
    write_set_sample,
)
from imagenet_build.sources.imagenet_a import IMAGENET_A
from imagenet_build.sources.imagenet_v2 import IMAGENET_V2
from imagenet_build.tools.sample_dataset import make_sample

SHARDS = ["--validation-shards", 2, "--layout-threads", 2, "--workers", 1]
ARCHIVES = {"imagenet-v2": "imagenetv2-matched-frequency.tar.gz", "imagenet-a": "imagenet-a.tar",
            "imagenet-r": "imagenet-r.tar", "imagenet-sketch": "ImageNet-Sketch.zip"}


@pytest.fixture(scope="module")
def sets(tmp_path_factory):
    """set -> its sample (written once for the module)."""
    made = {}

    def get(kind):
        if kind not in made:
            made[kind] = tmp_path_factory.mktemp(kind)
            make_sample(made[kind], kind=kind, **SAMPLE)
        return made[kind]

    return get


def a_tar(tmp_path, sets, change):
    """ImageNet-A's sample archive rewritten with change([(name, bytes)]), in a folder of its own."""
    folder = tmp_path / f"a{len(list(tmp_path.iterdir()))}"
    folder.mkdir()
    (folder / "imagenet-a.tar").write_bytes(tar_of(change(archive_members(sets("imagenet-a") / "imagenet-a.tar"))))
    return folder / "imagenet-a.tar"


def run(source, labels, out, *more):
    return run_cli("convert", "--from", source, "--labels-file", labels, "--output-dir", out, *SHARDS, *more,
                   "--json")


# ------------------------------------------------------------------ registering a set


def test_a_set_registers_as_a_copy_kind_whose_calls_are_the_shared_ones_with_the_set(monkeypatch):
    from imagenet_build.sources import copies

    monkeypatch.setattr(copies, "COPY_KINDS", list(copies.COPY_KINDS))
    the_set = EvalSet(name="Test-Set", short="test-set", archives={"t.tar": ""}, tops={"t": ""}, images=3,
                      suffix=".jpg", rank=99, subset=(0, 1))
    kind = register_set(the_set)
    assert copies.COPY_KINDS[-1] is kind and copies.copy_kind_named("Test-Set") is kind
    assert (kind.name, kind.short, kind.rank, kind.totals, kind.classes, kind.evaluation,
            kind.folder) == ("Test-Set", "test-set", 99, {"validation": 3}, 2, True, False)
    for call, shared in ((kind.identify, identify_set), (kind.assemble, assemble_set),
                         (kind.write_sample, write_set_sample)):
        assert call.func is shared and call.args == (the_set,) and not call.keywords


def test_an_evaluation_set_has_no_train_split_to_scan():
    copy = EvalCopy(IMAGENET_A, "imagenet-a.tar", "")
    assert copy.splits == ("validation",)
    with pytest.raises(AssertionError, match="^an evaluation set has no train split$"):
        copy.scan_train(None, "fail", None)


def test_a_numbered_sets_class_folders_are_the_class_numbers_as_written():
    """ImageNetV2's folders are 0..999 as plain numbers: not 1000, -1, 01, +1 or a synset."""
    assert [IMAGENET_V2.synset_of(f) for f in ("0", "999", "10")] == \
        [sorted_synsets()[0], sorted_synsets()[999], sorted_synsets()[10]]
    assert [IMAGENET_V2.synset_of(f) for f in ("1000", "-1", "01", "+1", "1.0", "", sorted_synsets()[0])] == \
        [None] * 7
    assert IMAGENET_V2.folder_of(sorted_synsets()[42]) == "42" and IMAGENET_A.folder_of("n01498041") == "n01498041"
    assert IMAGENET_A.synset_of("n01498041") == "n01498041" and IMAGENET_A.synset_of("n01440764") is None


# ------------------------------------------------------------------ which files are images, and which are foreign

FOREIGN = {  # what is added to ImageNet-A's archive -> the reason it is foreign
    "imagenet-a/{cls}/readme.txt": "not an image in a class folder (<class>/<name>.jpg)",
    "imagenet-a/{cls}/sub/x.jpg": "not an image in a class folder (<class>/<name>.jpg)",
    "imagenet-a/{cls}/.hidden.jpg": "not an image in a class folder (<class>/<name>.jpg)",
    "imagenet-a/notes.txt": "not an image in a class folder (<class>/<name>.jpg)",
    "imagenet-a/n01440764/x.jpg": "in a class folder that is not one of ImageNet-A's 200 classes",
    "other/x.jpg": "outside its top folder imagenet-a",
}


@pytest.mark.parametrize("stray", list(FOREIGN))
def test_each_kind_of_foreign_file_is_refused_in_its_words_and_listed_with_skip(sets, tmp_path, stray):
    labels = sets("imagenet-a") / "labels.txt"
    cls = archive_members(sets("imagenet-a") / "imagenet-a.tar")[1][0].split("/")[1]
    name = stray.format(cls=cls)
    archive = a_tar(tmp_path, sets, lambda members: members + [(name, b"\xff\xd8 not the set's")])
    expect_error(["convert", "--from", archive, "--labels-file", labels, "--output-dir", tmp_path / "o", *SHARDS],
                 1, f"{archive}:{name}: a foreign file ({FOREIGN[stray]}; 1 such): not part of the set; remove it, or "
                    "--on-error skip to leave it out")
    skipped = run(archive, labels, tmp_path / "s", "--on-error", "skip")
    assert skipped.exit_code == 0, skipped.output
    below = name if name.startswith("other/") else name.split("/", 1)[1]
    assert json.loads(skipped.stdout)["skipped"] == [{"file": below, "reason": f"a foreign file ({FOREIGN[stray]})",
                                                      "split": "validation"}]


def test_what_the_set_ships_beside_its_images_does_not_count_as_images(sets, tmp_path):
    """README.txt and one image: the copy is partial (one class of two has images), not empty."""
    labels = sets("imagenet-a") / "labels.txt"
    archive = a_tar(tmp_path, sets, lambda members: [m for m in members if m[0].endswith("README.txt")]
                    + [next(m for m in members if m[0].endswith(".jpg"))])
    expect_error(["convert", "--from", archive, "--labels-file", labels, "--output-dir", tmp_path / "o", *SHARDS],
                 1, "no class folder for 3 of ImageNet-A's 200 classes")
    only_readme = a_tar(tmp_path, sets, lambda members: [m for m in members if m[0].endswith("README.txt")])
    expect_error(["convert", "--from", only_readme, "--labels-file", labels, "--output-dir", tmp_path / "o2",
                  *SHARDS], 1, f"{only_readme}: holds no validation images")


def test_images_of_classes_the_labels_file_lacks_are_left_out_with_a_note(sets, tmp_path):
    root = sets("imagenet-a")
    archive = root / "imagenet-a.tar"
    first = archive_members(archive)[1][0].split("/")[1]
    labels = tmp_path / "labels.txt"
    labels.write_text("".join(line + "\n" for line in (root / "labels.txt").read_text().split() if line != first))
    result = run(archive, labels, tmp_path / "out")
    assert result.exit_code == 0, result.output
    count = sum(1 for name, _ in archive_members(archive) if f"/{first}/" in name)
    assert f"validation: {count} image(s) left out: their classes are not in {labels}" in \
        json.loads(result.stdout)["notes"]


def test_an_image_twice_with_skip_keeps_the_first_and_lists_the_second_where_it_lies(sets, tmp_path):
    labels = sets("imagenet-a") / "labels.txt"
    archive = a_tar(tmp_path, sets, lambda members: members + [next(m for m in members if m[0].endswith(".jpg"))])
    twice = next(n for n, _ in archive_members(archive) if n.endswith(".jpg")).split("/", 1)[1]
    result = run(archive, labels, tmp_path / "out", "--on-error", "skip")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["skipped"] == [{
        "file": f"{archive}:imagenet-a:{twice}", "split": "validation",
        "reason": f"a second {twice} (the first kept): {archive}:imagenet-a holds {twice} twice"}]


# ------------------------------------------------------------------ what the listing records


@pytest.mark.parametrize("kind", list(ARCHIVES))
def test_the_manifest_records_how_the_split_was_read_and_a_touched_archive_is_read_again(sets, tmp_path, kind):
    """The split's arrangement (a tar or the spool read by offset: flat-tar; a zip: zip), and the archive's size and
    time as the shards' input state: a rerun after the archive was touched rewrites them."""
    source = tmp_path / ARCHIVES[kind]
    shutil.copy(sets(kind) / ARCHIVES[kind], source)
    labels = sets(kind) / "labels.txt"
    first = run(source, labels, tmp_path / "out")
    assert first.exit_code == 0, first.output
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["inputs"]["validation"]["layout"] == ("zip" if source.suffix == ".zip" else "flat-tar")
    again = run(source, labels, tmp_path / "out")
    assert json.loads(again.stdout)["shards_written"] == 0, again.output
    stat = source.stat()
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    touched = run(source, labels, tmp_path / "out")
    assert json.loads(touched.stdout)["shards_written"] == 2, touched.output


# ------------------------------------------------------------------ the sample writer


def ilsvrc_like(tmp_path, synsets):
    """An ILSVRC sample's list files with these classes and no validation image (write_set_sample reads those)."""
    root = tmp_path / "ilsvrc"
    (root / "validation").mkdir(parents=True)
    (root / "labels.txt").write_text("".join(s + "\n" for s in synsets))
    (root / "validation_labels.txt").write_text("")
    return root


def test_a_sets_sample_takes_as_many_classes_as_the_set_has_and_no_class_outside_the_1000(tmp_path):
    every = sorted_synsets()
    write_set_sample(IMAGENET_A, ilsvrc_like(tmp_path, every[:200]), tmp_path)  # exactly its 200: written
    labels = (tmp_path / "labels.txt").read_text().split()
    assert labels == list(every[:IMAGENET_A.subset[-1] + 1])  # the 1000 up to its last class: 1000-class labels
    with tarfile.open(tmp_path / "imagenet-a.tar") as tar:
        assert [(m.name, tar.extractfile(m).read()) for m in tar] == \
            [("imagenet-a/README.txt", b"The ImageNet-A sample.\n")]  # what it ships beside its images
    with pytest.raises(BuildError, match=r"^--layout imagenet-a: 201 classes, the set has 200; lower --classes$"):
        write_set_sample(IMAGENET_A, ilsvrc_like(tmp_path / "more", every[:201]), tmp_path)
    (tmp_path / "v2").mkdir()
    with pytest.raises(BuildError, match=r"^--layout imagenet-v2: n99999999 is not one of the 1000 classes$"):
        write_set_sample(IMAGENET_V2, ilsvrc_like(tmp_path / "odd", [every[0], "n99999999"]), tmp_path / "v2")


@pytest.mark.parametrize("kind", ["imagenet-sketch", "imagenet-a"])
def test_a_samples_archive_is_written_as_the_sets_tools_write_it(tmp_path, kind):
    """The zip deflated and now and then stored, sizes in its headers (no data descriptor); the tar GNU tar's.
    (Written here, not taken from the module's samples: a mutant of the writer must be the one that writes it.)"""
    make_sample(tmp_path, kind=kind, classes=2, per_class=3, validation_per_class=2)
    if kind == "imagenet-sketch":
        with zipfile.ZipFile(tmp_path / "ImageNet-Sketch.zip") as z:
            infos = z.infolist()
        assert [i.compress_type for i in infos] == [zipfile.ZIP_STORED if n % 2 else zipfile.ZIP_DEFLATED
                                                    for n in range(len(infos))]
        assert len(infos) > 2 and not any(i.flag_bits & 8 for i in infos)
    else:
        assert (tmp_path / "imagenet-a.tar").read_bytes()[257:265] == b"ustar  \x00"  # GNU tar's magic


def test_a_top_folder_not_the_sets_is_refused_in_words_naming_the_sets_own(sets, tmp_path):
    labels = sets("imagenet-a") / "labels.txt"
    for change, message in (
            (lambda ms: [("other/" + n.split("/", 1)[1], d) for n, d in ms], "{archive}:other/: a top folder none of "
             "ImageNet-A's archives has (theirs: imagenet-a): not ImageNet-A's archive"),
            (lambda ms: [(n.split("/", 1)[1], d) for n, d in ms if n.count("/") == 2],
             "{archive}: holds its class folders ({first}/ ...) at its top, not in a top folder as ImageNet-A's "
             "archives do (imagenet-a): archive them inside one, or extract them into one and give --from that "
             "folder")):
        archive = a_tar(tmp_path, sets, change)
        first = Counter(n.split("/")[0] for n, _ in archive_members(archive)).most_common(1)[0][0]  # the top it takes
        line = expect_error(["convert", "--from", archive, "--labels-file", labels, "--output-dir", tmp_path / "o",
                             *SHARDS], 1)
        assert line == "error: " + message.format(archive=archive, first=first)
    v2 = tmp_path / "v2"
    v2.mkdir()
    shutil.copy(sets("imagenet-v2") / ARCHIVES["imagenet-v2"], v2 / "imagenetv2-topimages.tar.gz")
    line = expect_error(["convert", "--from", v2 / "imagenetv2-topimages.tar.gz", "--output-dir", tmp_path / "o2",
                         *SHARDS], 1)
    assert line == (f"error: {v2 / 'imagenetv2-topimages.tar.gz'}: holds imagenetv2-matched-frequency-format-val/, "
                    "ImageNetV2's matched-frequency variant, but its name says top-images: a renamed archive? name "
                    "it imagenetv2-matched-frequency.tar.gz")


def test_imagenet_v2s_top_folder_lines_name_all_its_top_folders(sets, tmp_path):
    tops = ("imagenetv2-matched-frequency, imagenetv2-matched-frequency-format-val, "
            "imagenetv2-threshold-0.7-format-val, imagenetv2-threshold0.7, imagenetv2-threshold0.7-format-val, "
            "imagenetv2-top-images-format-val, imagenetv2-topimages")
    members = archive_members(sets("imagenet-v2") / ARCHIVES["imagenet-v2"])
    for case, renamed, message in (
            ("other", [("other/" + n.split("/", 1)[1], d) for n, d in members],
             f":other/: a top folder none of ImageNetV2's archives has (theirs: {tops}): not ImageNetV2's archive"),
            ("loose", [(n.split("/", 1)[1], d) for n, d in members],
             f": holds its class folders (0/ ...) at its top, not in a top folder as ImageNetV2's archives do "
             f"({tops}): archive them inside one, or extract them into one and give --from that folder")):
        (tmp_path / case).mkdir()
        archive = tmp_path / case / ARCHIVES["imagenet-v2"]
        archive.write_bytes(gzip.compress(tar_of(renamed), mtime=0))
        line = expect_error(["convert", "--from", archive, "--labels-file", sets("imagenet-v2") / "labels.txt",
                             "--output-dir", tmp_path / case / "o", *SHARDS], 1)
        assert line == f"error: {archive}{message}"


def test_a_labels_file_naming_none_of_the_sets_classes_builds_nothing(sets, tmp_path):
    labels = tmp_path / "labels.txt"
    labels.write_text("n01440764\n")  # tench: not one of ImageNet-A's 200
    archive = sets("imagenet-a") / "imagenet-a.tar"
    line = expect_error(["convert", "--from", archive, "--labels-file", labels, "--output-dir", tmp_path / "o",
                         *SHARDS], 1)
    assert line == f"error: {archive}:imagenet-a: holds no images of ImageNet-A's 200 classes that {labels} names"


def test_a_spooled_sets_scan_decompresses_its_archive_when_nothing_did_before(sets, tmp_path):
    """The build decompresses every archive first (the spool's decompress); a scan without that does it itself, on
    the pool."""
    from imagenet_build.catalog.classes import load_catalog
    from imagenet_build.infra.workers import Workers

    copy = assemble_set(IMAGENET_V2, identify_set(IMAGENET_V2, str(sets("imagenet-v2") / ARCHIVES["imagenet-v2"])))
    catalog = load_catalog(sets("imagenet-v2") / "labels.txt")
    with copy.spool.placed_in(str(tmp_path)), Workers(1) as pool:
        result = copy.scan_validation(catalog, "fail", pool, list, "unused")
    assert len(result) == len([n for n, _ in archive_members(sets("imagenet-v2") / ARCHIVES["imagenet-v2"])])
    assert result.member_prefix == "imagenetv2-matched-frequency-format-val/" and result.path_names


# ------------------------------------------------------------------ --from: what a path is, and the copy they make


def test_a_path_is_the_sets_archive_its_folder_or_a_folder_holding_them_each_a_piece_with_its_variant(tmp_path):
    from imagenet_build.sources.copies import Piece

    v2 = "ImageNetV2"
    (tmp_path / "imagenetv2-topimages.tar.gz").write_bytes(b"")
    (tmp_path / "imagenetv2-threshold0.7-format-val").mkdir()
    (tmp_path / "imagenetv2-topimages").mkdir()
    (tmp_path / "imagenet-a").write_bytes(b"")  # a file of a top folder's name: no piece
    assert identify_set(IMAGENET_V2, str(tmp_path / "imagenetv2-topimages.tar.gz")) == \
        [Piece(v2, "archive:top-images", str(tmp_path / "imagenetv2-topimages.tar.gz"))]
    assert identify_set(IMAGENET_V2, str(tmp_path / "imagenetv2-topimages")) == \
        [Piece(v2, "folder:top-images", str(tmp_path / "imagenetv2-topimages"))]
    assert identify_set(IMAGENET_V2, str(tmp_path)) == [
        Piece(v2, "archive:top-images", str(tmp_path / "imagenetv2-topimages.tar.gz")),
        Piece(v2, "folder:threshold-0.7", str(tmp_path / "imagenetv2-threshold0.7-format-val")),
        Piece(v2, "unread:top-images", str(tmp_path / "imagenetv2-topimages"))]
    assert identify_set(IMAGENET_A, str(tmp_path / "imagenet-a")) == []
    assert identify_set(IMAGENET_A, str(tmp_path)) == []
    assert identify_set(IMAGENET_A, "s3://bucket/imagenet-a") == []
    assert identify_set(IMAGENET_A, "s3://bucket/data/imagenet-a.tar") == \
        [Piece("ImageNet-A", "archive:", "s3://bucket/data/imagenet-a.tar")]


def test_the_pieces_of_one_set_make_one_copy_described_as_what_was_given():
    from imagenet_build.infra.errors import UsageError
    from imagenet_build.sources.copies import Piece
    from imagenet_build.sources.eval_sets import SpooledEvalCopy

    def copy(*pieces):
        return assemble_set(IMAGENET_V2, [Piece("ImageNetV2", role, path) for role, path in pieces])

    archive = copy(("archive:top-images", "d/imagenetv2-top-images.tar.gz"))
    assert type(archive) is SpooledEvalCopy and archive.description == "ImageNetV2 top-images archive"
    assert (archive.path, archive.variant, archive.kind, archive.notes, archive.splits) == \
        ("d/imagenetv2-top-images.tar.gz", "top-images", "ImageNetV2", [], ("validation",))
    folder = copy(("folder:threshold-0.7", "d/imagenetv2-threshold0.7"))
    assert type(folder) is EvalCopy and folder.description == "ImageNetV2 threshold-0.7 folder"
    assert folder.path == "d/imagenetv2-threshold0.7" and not hasattr(folder, "spool")  # read in place
    beside = copy(("archive:top-images", "d/imagenetv2-top-images.tar.gz"), ("unread:top-images", "d/x"))
    assert beside.path == "d/imagenetv2-top-images.tar.gz" and beside.notes == [
        "d/x not read: the archive d/imagenetv2-top-images.tar.gz beside it is; give --from the folder itself to "
        "convert it instead"]
    unread_alone = copy(("unread:top-images", "d/x"))
    assert unread_alone.path == "d/x" and unread_alone.notes == []
    with pytest.raises(UsageError) as raised:
        copy(("archive:top-images", "a.tar.gz"), ("folder:matched-frequency", "b"), ("folder:threshold-0.7", "c"))
    assert str(raised.value) == ("--from was given 3 variants of ImageNetV2 (matched-frequency, threshold-0.7, "
                                 "top-images): give the archive or folder of one; each converts to its own output "
                                 "folder")
    with pytest.raises(UsageError) as raised:
        copy(("archive:top-images", "a.tar.gz"), ("folder:top-images", "b"))
    assert str(raised.value) == "--from was given ImageNetV2's validation split twice: a.tar.gz and b; give one of them"
    a = assemble_set(IMAGENET_A, [Piece("ImageNet-A", "archive:", "imagenet-a.tar")])
    assert type(a) is EvalCopy and a.description == "ImageNet-A archive"


def test_a_partial_copy_names_the_classes_missing_or_empty_and_skip_lists_each(tmp_path):
    """refuse_partial: the first three named (ImageNetV2's as number and synset), `...` past them; with skip each
    class left out, listed with why, and noted."""
    from types import SimpleNamespace

    from imagenet_build.infra.errors import InputError
    from imagenet_build.model import SplitInput
    from imagenet_build.sources.eval_sets import refuse_partial

    every = sorted_synsets()
    catalog = SimpleNamespace(label_of={s: i + 1 for i, s in enumerate(every[:6])})
    present = {every[0]: "0", every[5]: "5"}  # classes 1..4 missing; 2 and 3 there but empty
    with pytest.raises(InputError) as raised:
        refuse_partial(IMAGENET_V2, present, {"2", "3"}, catalog, "fail", "w", SplitInput("validation", "w", "", None))
    assert str(raised.value) == (
        f"w: no class folder, or an empty one, for 4 of ImageNetV2's 1000 classes (1 ({every[1]}), 2 ({every[2]}), "
        f"3 ({every[3]}) ...): a partial copy (an interrupted download or extraction?); download it again, pass a "
        "--labels-file without those classes, or --on-error skip to build without them")
    result = SplitInput("validation", "w", "", None)
    refuse_partial(IMAGENET_V2, present, {"2", "3"}, catalog, "skip", "w", result)
    assert result.empty_classes == list(every[1:5])
    assert result.left_out == [("1/", "class folder missing: a partial copy"),
                               ("2/", "class folder empty: a partial copy"),
                               ("3/", "class folder empty: a partial copy"),
                               ("4/", "class folder missing: a partial copy")]
    assert result.notes == [f"validation: 4 of ImageNetV2's 1000 classes have no class folder, or an empty one: "
                            f"{', '.join(every[1:5])}"]
    with pytest.raises(InputError, match=rf"\(1 \({every[1]}\), 2 \({every[2]}\), 3 \({every[3]}\)\): a partial"):
        refuse_partial(IMAGENET_V2, {**present, every[4]: "4"}, set(), catalog, "fail", "w", result)  # three: no ...
    whole = SplitInput("validation", "w", "", None)
    refuse_partial(IMAGENET_V2, {s: str(i) for i, s in enumerate(every[:6])}, set(), catalog, "fail", "w", whole)
    assert (whole.left_out, whole.notes, whole.empty_classes) == ([], [], [])
    with pytest.raises(InputError, match=r"^w: no class folder for 1 of ImageNet-A's 200 classes \(n01498041\): "):
        refuse_partial(IMAGENET_A, {}, set(), SimpleNamespace(label_of={"n01498041": 1}), "fail", "w", whole)
