"""convert --from Hugging Face's imagenet-1k .tar.gz archives: the ILSVRC tarballs' shards; bad archives refused."""

import json
import shutil
import tarfile
from pathlib import Path

import pytest

from conftest import SAMPLE, run_cli, shard_files, with_boxes
from helpers import expect_one_error_line as expect_error
from helpers import rewrite_tar_gz as rewrite
from imagenet_build.format.naming import LOCK_NAME
from imagenet_build.tools.sample_dataset import make_sample


@pytest.fixture(scope="module")
def hf(tmp_path_factory):
    out = tmp_path_factory.mktemp("hf") / "imagenet-1k"
    make_sample(out, kind="hf", **SAMPLE)
    return out


def test_sample_is_shaped_as_the_real_repository(hf):
    data = hf / "data"
    assert sorted(p.name for p in data.iterdir()) == sorted(
        [f"train_images_{k}.tar.gz" for k in range(5)] + ["val_images.tar.gz", "test_images.tar.gz"])
    with tarfile.open(data / "val_images.tar.gz") as tar:
        names = tar.getnames()
    assert names[0] == "ILSVRC2012_val_00000001_" + (hf / "validation_labels.txt").read_text().split()[0] + ".JPEG"
    with tarfile.open(data / "train_images_0.tar.gz") as tar:
        assert tar.getnames()[0] == "n01440764_1_n01440764.JPEG"


@pytest.mark.parametrize("given", ["root", "data", "archives"])
def test_from_hf_gives_the_shards_of_the_ilsvrc_tarballs(hf, ilsvrc, reference, tmp_path, given):
    paths = {"root": [hf], "data": [hf / "data"], "archives": sorted((hf / "data").glob("*.tar.gz"))}[given]
    out = tmp_path / "out"
    result = run_cli("convert", *[a for p in paths for a in ("--from", p)], "--output-dir", out, *with_boxes(ilsvrc),
                     "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["found"].startswith("Hugging Face ILSVRC/imagenet-1k .tar.gz archives: 48 train, 16 validation")
    assert any("test_images.tar.gz ignored" in n for n in summary["notes"])
    assert shard_files(out) == shard_files(reference)
    assert sorted(p.name for p in out.iterdir()) == sorted(  # spool gone, the archives' listings kept for a rerun
        [p.name for p in reference.iterdir()] + [".imagenet-build-listings"])


@pytest.fixture
def copy_of(hf, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(hf / "data", data)
    return data


def test_a_truncated_archive_is_refused(copy_of, hf, tmp_path):
    archive = copy_of / "train_images_2.tar.gz"
    archive.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    out = tmp_path / "out"
    expect_error(["convert", "--from", copy_of, "--output-dir", out, *with_boxes(hf)],
                 "train_images_2.tar.gz", "truncated", out=out)


def test_a_held_output_is_refused_before_any_archive_is_read(copy_of, hf, tmp_path):
    """The lock is taken first: a second run decompresses nothing (here it would find the truncated
    archive), and a refused run into a new nested folder leaves none of the folders it made."""
    from imagenet_build.infra.lock import FolderLock

    archive = copy_of / "train_images_2.tar.gz"
    archive.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    out = tmp_path / "out"
    with FolderLock(out, "imagenet-build convert"):
        expect_error(["convert", "--from", copy_of, "--output-dir", out, *with_boxes(hf)],
                     "in use by another imagenet-build", out=out, nothing_written=False)
        assert sorted(p.name for p in out.iterdir()) == [LOCK_NAME]
    nested = tmp_path / "new" / "deeper" / "out"
    expect_error(["convert", "--from", copy_of, "--output-dir", nested, *with_boxes(hf)], "truncated", out=nested)
    assert not (tmp_path / "new").exists()


def test_a_member_that_is_not_an_image_is_refused(copy_of, hf, tmp_path):
    rewrite(copy_of / "val_images.tar.gz", lambda members: [(members[0][0], b"not a picture")] + members[1:])
    out = tmp_path / "out"
    line = expect_error(["convert", "--from", copy_of, "--output-dir", out, *with_boxes(hf)],
                        f"{copy_of / 'val_images.tar.gz'}:ILSVRC2012_val_00000001_n01440764.JPEG: not an image",
                        out=out, nothing_written=False)
    assert ".imagenet-build-spool" not in line  # the archive and its member, not the decompressed copy
    assert len(list(out.glob("validation-*"))) < 2  # not the shard that holds it (the others may be written)


def test_a_name_whose_synset_disagrees_with_its_label(copy_of, hf, tmp_path):
    def wrong(members):
        name, data = members[0]
        return [(name.rsplit("_", 1)[0] + "_n09999999.JPEG", data)] + members[1:]

    rewrite(copy_of / "val_images.tar.gz", wrong)
    out = tmp_path / "out"
    expect_error(["convert", "--from", copy_of, "--output-dir", out, *with_boxes(hf)],
                 "val_images.tar.gz:ILSVRC2012_val_00000001_n09999999.JPEG", "gives n01440764 for image 1", out=out)
    skipped = run_cli("convert", "--from", copy_of, "--output-dir", out, *with_boxes(hf), "--on-error", "skip",
                      "--json")
    assert skipped.exit_code == 0, skipped.output
    summary = json.loads(skipped.stdout)
    assert summary["splits"]["validation"]["records"] == 15
    assert [s["file"] for s in summary["skipped"]] == ["val_images.tar.gz:ILSVRC2012_val_00000001_n09999999.JPEG"]

    rewrite(copy_of / "train_images_1.tar.gz",
            lambda members: [(members[0][0].replace("_n01440764.JPEG", "_n01443537.JPEG"), members[0][1])]
            + members[1:])
    expect_error(["convert", "--from", copy_of, "--output-dir", tmp_path / "o2", *with_boxes(hf)],
                 "train_images_1.tar.gz:n01440764_", "named for synset n01440764 but labelled n01443537",
                 out=tmp_path / "o2")


def test_an_image_in_two_archives_names_those_two(copy_of, hf, tmp_path):
    first = []

    def keep(members):
        first.append(members[0])
        return members

    rewrite(copy_of / "train_images_0.tar.gz", keep)
    rewrite(copy_of / "train_images_3.tar.gz", lambda members: members + first)
    out = tmp_path / "out"
    line = expect_error(["convert", "--from", copy_of, "--output-dir", out, *with_boxes(hf)],
                        "train_images_3.tar.gz: holds n01440764_1.JPEG, which", "train_images_0.tar.gz holds too",
                        out=out)
    assert not any(f"train_images_{k}" in line for k in (1, 2, 4)), line
    skipped = run_cli("convert", "--from", copy_of, "--output-dir", out, *with_boxes(hf), "--on-error", "skip",
                      "--json")
    assert skipped.exit_code == 0, skipped.output
    assert json.loads(skipped.stdout)["splits"]["train"]["records"] == 48  # the second left out, listed
    manifest = json.loads((out / "manifest.json").read_text())
    assert [e["file"] for e in manifest["splits"]["train"]["left_out"]] == [
        f"{copy_of / 'train_images_3.tar.gz'}:n01440764_1.JPEG"]


def test_an_output_inside_the_copys_folder_is_refused_however_its_archives_are_named(copy_of, hf, tmp_path):
    archives = sorted(copy_of.glob("*.tar.gz"))
    for given in ([copy_of], archives):
        expect_error(["convert", *[a for p in given for a in ("--from", p)], "--output-dir", copy_of / "out",
                      *with_boxes(hf)], "--output-dir", "is inside", str(copy_of), out=copy_of / "out")
    assert not (copy_of / "out").exists()


def test_hf_with_the_ilsvrc_tarballs_is_refused(hf, ilsvrc, tmp_path):
    out = tmp_path / "out"
    expect_error(["convert", "--from", hf / "data", "--from", ilsvrc / "ILSVRC2012_img_val.tar", "--output-dir", out,
                  *with_boxes(hf)], "two different copies", out=out)


def test_a_partial_set_is_refused(copy_of, hf, tmp_path):
    (copy_of / "train_images_4.tar.gz").unlink()
    out = tmp_path / "out"
    expect_error(["convert", "--from", copy_of, "--output-dir", out, *with_boxes(hf)],
                 "train_images_4.tar.gz missing", out=out)
    assert not out.exists()


# ------------------------------------------------------------------ the parquet files the repository serves now


@pytest.fixture(scope="module")
def hf_parquet(tmp_path_factory):
    pytest.importorskip("pyarrow", reason="Hugging Face's parquet files need pyarrow (the parquet extra)")
    out = tmp_path_factory.mktemp("hf-parquet") / "imagenet-1k"
    make_sample(out, kind="hf-parquet", **SAMPLE)
    return out


def test_from_hf_parquet_gives_the_shards_of_the_ilsvrc_tarballs(hf_parquet, ilsvrc, reference, tmp_path):
    out = tmp_path / "out"
    result = run_cli("convert", "--from", hf_parquet, "--output-dir", out, *with_boxes(ilsvrc), "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["found"].startswith("Hugging Face ILSVRC/imagenet-1k (parquet) files: 48 train, 16 validation")
    assert {split["layout"] for split in summary["splits"].values()} == {"parquet"}
    assert shard_files(out) == shard_files(reference)


@pytest.mark.parametrize("label,path,problem", [
    (-1, "kept", "label -1 is outside 0..999"), (2 ** 40, "kept", f"label {2 ** 40} is outside 0..999"),
    (None, "kept", "label is null"), (0, None, "image.path is null")])
def test_every_parquet_label_and_path_is_checked(hf_parquet, hf, tmp_path, label, path, problem):
    """Not only labels in 0..999 (which were compared with the name): each stops the build naming file and row;
    --on-error skip leaves the row out, listed."""
    import pyarrow
    import pyarrow.parquet as pq

    data = tmp_path / "data"
    shutil.copytree(hf_parquet / "data", data)
    target = data / "train-00001-of-00003.parquet"
    table = pq.read_table(target)
    image = table.column("image").combine_chunks()
    paths, labels = image.field("path").to_pylist(), table.column("label").to_pylist()
    row = 2
    labels[row] = label
    if path is None:
        paths[row] = None
    struct = pyarrow.StructArray.from_arrays([image.field("bytes"), pyarrow.array(paths, pyarrow.string())],
                                             ["bytes", "path"])
    pq.write_table(pyarrow.table({"image": struct, "label": pyarrow.array(labels, pyarrow.int64())}), target,
                   row_group_size=4)
    where = f"{target.name}:row {row}" if path is None else f"{target.name}:{paths[row]}: row {row}"
    out = tmp_path / "out"
    expect_error(["convert", "--from", data, "--output-dir", out, *with_boxes(hf)], where, problem, out=out)
    skipped = run_cli("convert", "--from", data, "--output-dir", out, *with_boxes(hf), "--on-error", "skip", "--json")
    assert skipped.exit_code == 0, skipped.output
    assert json.loads(skipped.stdout)["splits"]["train"]["records"] == 47
    left = json.loads((out / "manifest.json").read_text())["splits"]["train"]["left_out"]
    assert [e["file"] for e in left] == [target.name + (f":row {row}" if path is None else f":{paths[row]}")]
    assert problem in left[0]["reason"]


def test_hf_parquet_refuses_a_truncated_file_a_wrong_label_and_a_partial_set(hf_parquet, hf, tmp_path):
    import pyarrow.parquet as pq

    data = tmp_path / "data"
    shutil.copytree(hf_parquet / "data", data)
    first = data / "train-00001-of-00003.parquet"
    first.write_bytes(first.read_bytes()[:-50])
    out = tmp_path / "out"
    expect_error(["convert", "--from", data, "--output-dir", out, *with_boxes(hf)],
                 "train-00001-of-00003.parquet", "not a readable parquet file", out=out)

    shutil.copy(hf_parquet / "data" / first.name, first)
    table = pq.read_table(data / "validation-00000-of-00001.parquet")
    labels = table.column("label").to_pylist()
    labels[0] = (labels[0] + 1) % 4
    import pyarrow

    pq.write_table(table.set_column(1, "label", pyarrow.array(labels, pyarrow.int64())),
                   data / "validation-00000-of-00001.parquet")
    expect_error(["convert", "--from", data, "--output-dir", out, *with_boxes(hf)],
                 "validation-00000-of-00001.parquet:ILSVRC2012_val_00000001_", "but its label", out=out)
    # columns of the right names and the wrong types: a binary image, a string label
    original = pq.read_table(data / "validation-00000-of-00001.parquet")
    flat = original.set_column(0, "image", original.column("image").combine_chunks().field("bytes"))
    pq.write_table(flat, data / "validation-00000-of-00001.parquet")
    expect_error(["convert", "--from", data, "--output-dir", out, *with_boxes(hf)],
                 "validation-00000-of-00001.parquet", "image column is binary", out=out)
    texts = original.set_column(1, "label", pyarrow.array([str(v) for v in labels]))
    pq.write_table(texts, data / "validation-00000-of-00001.parquet")
    expect_error(["convert", "--from", data, "--output-dir", out, *with_boxes(hf)],
                 "validation-00000-of-00001.parquet", "label column is string", out=out)
    image = original.column("image").combine_chunks()
    for field, column in (("bytes", pyarrow.array([b.decode("latin-1") for b in image.field("bytes").to_pylist()])),
                          ("path", pyarrow.array(range(len(image)), pyarrow.int64()))):
        others = {"bytes": image.field("bytes"), "path": image.field("path"), field: column}
        struct = pyarrow.StructArray.from_arrays([others["bytes"], others["path"]], ["bytes", "path"])
        pq.write_table(original.set_column(0, "image", struct), data / "validation-00000-of-00001.parquet")
        expect_error(["convert", "--from", data, "--output-dir", out, *with_boxes(hf)],
                     "validation-00000-of-00001.parquet", "not a struct of bytes (binary) and path (string)", out=out)

    (data / "train-00002-of-00003.parquet").unlink()
    expect_error(["convert", "--from", data, "--output-dir", out, *with_boxes(hf)],
                 "train-00002-of-00003.parquet", "missing", out=out)


def test_resized_builds_from_hf_leave_no_spool(hf, tmp_path):
    """The unpacked archives live in the output folder for the run only, beside the resized builds."""
    out = tmp_path / "out"
    result = run_cli("convert", "--from", hf, "--output-dir", out, *with_boxes(hf), "--resize", "shorter:64,96")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == [".imagenet-build-listings", "shorter-64", "shorter-96"]
    for size in ("shorter-64", "shorter-96"):
        assert run_cli("verify", out / size).exit_code == 0


def test_isal_and_zlib_inflate_give_the_same_shards(hf, reference, tmp_path):
    """ISA-L's inflate is used where installed, zlib's elsewhere: the shards are the same bytes."""
    import subprocess
    import sys

    from imagenet_build.infra.deflate import deflate_codec

    pytest.importorskip("isal")
    assert deflate_codec().decompressobj.__module__.startswith("isal")
    out = tmp_path / "zlib"
    code = ("import sys; sys.modules['isal'] = None\n"
            "from imagenet_build.cli import main; sys.argv = ['imagenet-build'] + sys.argv[1:]; main()")
    result = subprocess.run([sys.executable, "-c", code, "convert", "--from", str(hf), "--output-dir", str(out),
                             *map(str, with_boxes(hf))], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert shard_files(out) == shard_files(reference)


def test_every_archive_is_decompressed_once_in_one_batch_largest_first(hf, tmp_path):
    """Both splits' archives go to the workers together, the largest first, so no core waits for the
    train split to end before the validation archive starts; each scan then takes its own from the batch."""
    from imagenet_build.infra.workers import Workers
    from imagenet_build.sources import find_copy, spool
    from imagenet_build.sources.inflate import spool_and_list

    copy = find_copy([str(hf)])
    calls = []

    def recorded(archive, target, threads):
        calls.append(archive)
        return spool_and_list(archive, target, threads)

    archives = {"train": [str(hf / "data" / f"train_images_{k}.tar.gz") for k in range(5)],
                "validation": [str(hf / "data" / "val_images.tar.gz")]}
    assert copy.spool.archives == archives
    copy.spool.task = recorded
    with Workers(1) as pool, copy.spool.placed_in(str(tmp_path / "out")):  # one worker: tasks in order, here
        copy.spool.decompress(pool)
        assert calls == sorted(archives["train"] + archives["validation"], key=lambda a: -Path(a).stat().st_size)
        folder, listings = copy.spool.take("validation", pool)
        assert len(calls) == 6 and len(listings) == 1 and listings[0][0]  # taken from the batch, not redone
        assert set(copy.spool.spooled) == {"train"}  # not held past its scan
        assert sorted(p.name for p in Path(folder).iterdir()) == ["0000-val_images.tar", spool.PIECES]
    assert not (tmp_path / "out").exists()


def test_an_archive_gets_the_cores_that_would_idle_beside_it_as_threads():
    from imagenet_build.sources.spool import _thread_counts

    # Hugging Face's train archives (~29 GB each) and validation archive (~7 GB), largest first: on 2
    # cores one each, but the last train archive inflates almost alone (the validation one ends early)
    hf = [29] * 5 + [7]
    assert _thread_counts(hf, 2) == [1, 1, 1, 1, 2, 1]
    assert _thread_counts(hf, 4) == [1, 1, 1, 1, 3, 2]
    assert _thread_counts(hf, 16) == [3, 3, 3, 3, 3, 3]
    assert _thread_counts([29] * 5, 2) == [1, 1, 1, 1, 2]  # train alone: the fifth inflates alone
    assert _thread_counts([29] * 4, 2) == [1] * 4  # two full rounds: no core idles
    # the face-blurred release: one train archive with 91% of the bytes takes both cores of 2, 15 of 16
    assert _thread_counts([869, 87], 2) == [2, 1] and _thread_counts([869, 87], 16)[0] == 15
    assert _thread_counts([0, 0], 4) == [1, 1]  # empty archives: one thread, no division by zero


def test_a_parquet_file_whose_rows_are_all_left_out_is_not_an_empty_piece(hf_parquet, hf, tmp_path):
    """Under --on-error skip its rows are listed as left out; the file held them, so it is not refused as empty."""
    import pyarrow
    import pyarrow.parquet as pq

    data = tmp_path / "data"
    shutil.copytree(hf_parquet / "data", data)
    target = data / "train-00001-of-00003.parquet"
    table = pq.read_table(target)
    pq.write_table(table.set_column(1, "label", pyarrow.array([-1] * len(table), pyarrow.int64())), target)
    out = tmp_path / "out"
    result = run_cli("convert", "--from", data, "--output-dir", out, *with_boxes(hf), "--on-error", "skip", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["splits"]["train"]["records"] == 48 - len(table)
