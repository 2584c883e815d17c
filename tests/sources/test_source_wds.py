"""convert --from a WebDataset copy (timm's imagenet-1k-wds): the shards of the ILSVRC tarballs; bad shards refused."""

import io
import json
import shutil
import tarfile

import pytest

from conftest import layout_args, run_cli, shard_files
from helpers import expect_error
from imagenet_build.tools.sample_dataset import make_sample


@pytest.fixture(scope="module")
def wds(tmp_path_factory):
    out = tmp_path_factory.mktemp("wds") / "copy"
    make_sample(out, classes=4, per_class=12, validation_per_class=4, kind="wds")
    return out


def test_the_sample_is_shaped_as_timms_copy(wds):
    names = sorted(p.name for p in wds.glob("*.tar"))
    assert names == ["imagenet1k-train-0000.tar", "imagenet1k-train-0001.tar", "imagenet1k-train-0002.tar",
                     "imagenet1k-validation-00.tar", "imagenet1k-validation-01.tar"]
    with tarfile.open(wds / "imagenet1k-train-0000.tar") as tar:
        members = tar.getnames()
        first = members[0].rsplit(".", 1)[0]
        assert members[:3] == [f"{first}.cls", f"{first}.jpg", f"{first}.json"]
        meta = json.loads(tar.extractfile(f"{first}.json").read())
        assert set(meta) == {"filename", "height", "label", "width"}
        assert meta["filename"] == f"{first.split('_')[0]}/{first}.JPEG"
        assert int(tar.extractfile(f"{first}.cls").read()) == meta["label"]
        keys = [m.rsplit(".", 1)[0] for m in members[::3]]
    assert keys != sorted(keys), "samples are shuffled across shards, as the real ones are"


@pytest.mark.parametrize("given", ["folder", "shard-files"])
def test_from_the_shards_gives_the_shards_of_the_ilsvrc_archives(wds, ilsvrc, reference, tmp_path, given):
    paths = [wds] if given == "folder" else sorted(wds.glob("*.tar"))
    out = tmp_path / "out"
    result = run_cli("convert", *[a for p in paths for a in ("--from", p)], "--bounding-box-file",
                     ilsvrc / "bboxes.csv", "--output-dir", out, *layout_args(wds), "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["found"].startswith("WebDataset shards: 48 train, 16 validation")
    assert shard_files(out) == shard_files(reference)


def rewrite(source, target, change):
    """A copy of shard `source` with change(name, data) -> (name, data) or None (dropped) per member."""
    with tarfile.open(source) as tar, tarfile.open(target, "w", format=tarfile.PAX_FORMAT) as out:
        for member in tar.getmembers():
            kept = change(member.name, tar.extractfile(member).read())
            if kept:
                info = tarfile.TarInfo(kept[0])
                info.size = len(kept[1])
                out.addfile(info, io.BytesIO(kept[1]))


def broken_copy(wds, tmp_path, change, shard="imagenet1k-train-0001.tar"):
    copy = tmp_path / "copy"
    shutil.copytree(wds, copy)
    rewrite(wds / shard, copy / shard, change)
    return copy


def first_key(wds, shard="imagenet1k-train-0001.tar"):
    with tarfile.open(wds / shard) as tar:
        return tar.getnames()[0].rsplit(".", 1)[0]


def convert_args(copy, out):
    return ["convert", "--from", copy, "--output-dir", out, *layout_args(copy)]


def no_shards(out):
    return not out.exists() or not [p for p in out.rglob("*") if p.is_file() and p.name.startswith(("train-", "val"))]


def no_incomplete_shard(out, bad_name):
    """Other shards may be whole (a rerun keeps them); none holds the bad image, and no temporary file is left."""
    from imagenet_build.format.tfrecord import read_records

    for path in out.rglob("*"):
        assert ".tmp" not in path.name, path
        if path.parent == out and path.name.startswith("train-"):
            data = path.read_bytes()
            assert all(bad_name.encode() not in payload for _, payload, _ in read_records(io.BytesIO(data), len(data)))
    manifest = out / "manifest.json"
    assert not manifest.exists() or not json.loads(manifest.read_text()).get("complete")


def test_a_sample_without_cls_is_an_error(wds, tmp_path):
    key = first_key(wds)
    copy = broken_copy(wds, tmp_path, lambda n, d: None if n == f"{key}.cls" else (n, d))
    out = tmp_path / "out"
    expect_error(convert_args(copy, out), 1, "imagenet1k-train-0001.tar", f"sample {key}", "no .cls")
    assert no_shards(out)


def test_a_sample_without_cls_is_left_out_under_skip(wds, tmp_path):
    key = first_key(wds)
    copy = broken_copy(wds, tmp_path, lambda n, d: None if n == f"{key}.cls" else (n, d))
    result = run_cli(*convert_args(copy, tmp_path / "out"), "--on-error", "skip", "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["splits"]["train"]["records"] == 47
    assert any(s["file"] == f"imagenet1k-train-0001.tar/{key}" and "no .cls" in s["reason"]
               for s in summary["skipped"]), summary["skipped"]


def test_a_cls_disagreeing_with_the_names_synset_is_an_error(wds, tmp_path):
    key = first_key(wds)
    wrong = lambda n, d: (n, str((int(d) + 1) % 4).encode()) if n == f"{key}.cls" else (n, d)  # noqa: E731
    copy = broken_copy(wds, tmp_path, wrong)
    out = tmp_path / "out"
    expect_error(convert_args(copy, out), 1, "imagenet1k-train-0001.tar", f"sample {key}",
                 f"but its name {key}.JPEG is of {key.split('_')[0]}")
    assert no_shards(out)


def test_a_validation_cls_disagreeing_with_the_validation_labels_is_an_error(wds, tmp_path):
    shard = "imagenet1k-validation-01.tar"
    key = first_key(wds, shard)
    wrong = lambda n, d: (n, str((int(d) + 1) % 4).encode()) if n == f"{key}.cls" else (n, d)  # noqa: E731
    copy = broken_copy(wds, tmp_path, wrong, shard)
    expect_error(convert_args(copy, tmp_path / "out"), 1, shard, f"sample {key}", "is of n0")


def test_a_truncated_shard_is_an_error(wds, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(wds, copy)
    shard = copy / "imagenet1k-train-0002.tar"
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
    out = tmp_path / "out"
    expect_error(convert_args(copy, out), 1, "imagenet1k-train-0002.tar", "truncated")
    assert no_shards(out)


def test_a_member_that_is_not_an_image_is_an_error(wds, tmp_path):
    key = first_key(wds)
    copy = broken_copy(wds, tmp_path, lambda n, d: (n, b"<html>not found</html>") if n == f"{key}.jpg" else (n, d))
    out = tmp_path / "out"
    expect_error(convert_args(copy, out), 1, f"imagenet1k-train-0001.tar:{key}.jpg", "not an image")
    no_incomplete_shard(out, f"{key}.JPEG")


def test_a_folder_missing_a_shard_is_a_partial_copy(wds, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(wds, copy)
    (copy / "imagenet1k-train-0001.tar").unlink()
    expect_error(convert_args(copy, tmp_path / "out"), 1, "train shard number 1 is missing", "partial copy")


def test_shards_with_an_ilsvrc_archive_are_refused(wds, ilsvrc, tmp_path):
    out = tmp_path / "out"
    expect_error(["convert", "--from", wds, "--from", ilsvrc / "ILSVRC2012_img_train.tar", "--output-dir", out],
                 2, "two different copies", "WebDataset shards", "ILSVRC2012")
    assert not out.exists()


def test_keys_that_are_not_imagenet_names_take_the_json_filename(wds, ilsvrc, reference, tmp_path):
    """Copies that key samples by a running number keep the original name in the json: records unchanged."""
    copy = tmp_path / "copy"
    copy.mkdir()
    for shard in sorted(wds.glob("*.tar")):
        renamed = {}

        def number(name, data, renamed=renamed):
            key, ext = name.split(".", 1)
            renamed.setdefault(key, f"{len(renamed):08d}")
            return f"{renamed[key]}.{ext}", data

        rewrite(shard, copy / shard.name, number)
    for name in ("labels.txt", "validation_labels.txt"):
        shutil.copy(wds / name, copy / name)
    out = tmp_path / "out"
    result = run_cli("convert", "--from", copy, "--bounding-box-file", ilsvrc / "bboxes.csv", "--output-dir", out,
                     *layout_args(copy))
    assert result.exit_code == 0, result.output
    assert shard_files(out) == shard_files(reference)


def test_the_fast_header_listing_agrees_with_tarfiles(wds, tmp_path):
    """Plain ustar headers are parsed directly (tarfile costs ~100 us a header); anything else goes to tarfile."""
    import os

    from imagenet_build.sources.tars import list_members, plain_members

    def both(path):
        """(the fast listing, tarfile's: a file without a descriptor, which list_members leaves to tarfile)."""
        with open(path, "rb") as f:
            size = os.path.getsize(path)
            return (plain_members(f.fileno(), size, str(path), small_data=True),
                    list_members(io.BytesIO(f.read()), size, str(path)))

    for shard in sorted(wds.glob("*.tar")):
        fast, slow = both(shard)
        assert fast[0] == slow
        cls = [k for k, m in enumerate(slow) if m[0].endswith(".cls")]
        assert cls and all(fast[1][k].isdigit() for k in cls)
    long_name = tmp_path / "imagenet1k-train-0000.tar"
    for fmt in (tarfile.PAX_FORMAT, tarfile.GNU_FORMAT):
        with tarfile.open(long_name, "w", format=fmt) as tar:
            for name in ("a" * 120 + ".jpg", "b.cls"):
                info = tarfile.TarInfo(name)
                info.size = 1
                tar.addfile(info, io.BytesIO(b"1"))
        fast, slow = both(long_name)
        assert fast is None and [m[0] for m in slow] == ["a" * 120 + ".jpg", "b.cls"]


def test_hidden_files_in_a_shard_are_ignored_not_taken_for_samples():
    from imagenet_build.sources.webdataset_shard import _samples

    ignored = []
    members = [("n01440764_1.jpg", 512, 10, True, 0), ("n01440764_1.cls", 1024, 1, True, 0),
               (".hidden.txt", 1536, 5, True, 0), ("sub/.DS_Store", 2048, 5, True, 0)]
    samples = _samples(members, "shard-0000.tar", "/x/shard-0000.tar", ignored)
    assert list(samples) == ["n01440764_1"]
    assert ignored == ["shard-0000.tar:.hidden.txt", "shard-0000.tar:sub/.DS_Store"]
