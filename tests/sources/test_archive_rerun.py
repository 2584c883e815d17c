"""A rerun decides what must be written before it decompresses anything: every copy `sample --layout` knows.

A .tar.gz (or parquet) copy is read from a spool of its decompressed archives; a rerun whose
shards are all kept plans from the listings the first run kept in the output and decompresses
nothing; a changed archive is decompressed again and gives the same bytes.
"""

import json
import os
import zlib

import pytest

from conftest import layout_args, run_cli, tree_digest
from imagenet_build.format.naming import LISTINGS_NAME
from imagenet_build.sources import listings, spool
from imagenet_build.sources.copies import sample_kinds


@pytest.fixture
def spooled_splits(monkeypatch):
    """The splits each convert in this process gives a spool folder (the real make_spool, watched)."""
    made = []
    real = spool.Spool.make_folder

    def watched(self, archives, split, *args, **kwargs):
        made.append(split)
        return real(self, archives, split, *args, **kwargs)

    monkeypatch.setattr(spool.Spool, "make_folder", watched)
    return made


def written(ilsvrc, tmp_path, kind):
    """The sample written as `kind` lays ImageNet out, in tmp_path/copy."""
    copy = tmp_path / "copy"
    copy.mkdir()
    sample_kinds()[kind].write_sample(ilsvrc, copy)
    return copy


def convert(ilsvrc, copy, out, *more):
    labels = copy if (copy / "labels.txt").exists() else ilsvrc  # an evaluation set's sample may write its own
    result = run_cli("convert", "--from", copy, "--output-dir", out, *layout_args(labels), "--json", *more)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("kind", sorted(sample_kinds()))
def test_a_rerun_decompresses_only_what_it_must_write(ilsvrc, tmp_path, spooled_splits, kind):
    copy, out = written(ilsvrc, tmp_path, kind), tmp_path / "out"
    convert(ilsvrc, copy, out)
    first = sorted(spooled_splits)
    built = {k: v for k, v in tree_digest(out).items() if not k.startswith(LISTINGS_NAME)}
    spooled_splits.clear()
    again = convert(ilsvrc, copy, out)
    assert spooled_splits == [] and again["shards_written"] == 0
    assert tree_digest(out) == dict(built, **{k: v for k, v in tree_digest(out).items()
                                              if k.startswith(LISTINGS_NAME)})
    if not first:  # a copy read in place: nothing to decompress, nothing kept
        assert not (out / LISTINGS_NAME).exists()
        return
    evaluation = sample_kinds()[kind].evaluation  # a validation split alone
    assert first == (["validation"] if evaluation else ["train", "validation"])
    assert any(note.startswith("not decompressed: ") for note in again["notes"])
    (out / "validation-00001-of-00002").unlink()  # one shard to write: its split alone is decompressed
    again = convert(ilsvrc, copy, out)
    assert spooled_splits == ["validation"] and again["shards_written"] == 1
    spooled_splits.clear()
    archive = max((p for p in copy.rglob("*") if p.is_file() and ("train" in p.name) != evaluation),
                  key=lambda p: p.stat().st_size)  # an evaluation set's sample: its archive alone
    stat = archive.stat()
    os.utime(archive, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # touched: its shards are redone
    again = convert(ilsvrc, copy, out)
    assert spooled_splits == [first[0]] and again["shards_written"] == (2 if evaluation else 4)
    assert {k: v for k, v in tree_digest(out).items() if not k.startswith(LISTINGS_NAME)} == dict(
        built, **{"manifest.json": tree_digest(out)["manifest.json"]})  # its inputs record the new mtime
    assert not list(out.glob(".imagenet-build-spool-*"))


def test_a_kept_listing_that_disagrees_with_its_archive_is_refused_and_removed(tmp_path, ilsvrc, spooled_splits):
    copy, out = written(ilsvrc, tmp_path, "hf"), tmp_path / "out"
    convert(ilsvrc, copy, out)
    archive = str(copy / "data" / "val_images.tar.gz")
    kept = listings.listing_path(str(out), archive)
    listed, _ = listings.read_listing(str(out), archive, spool.stamp([archive]))
    offsets = listed[1]
    offsets[0] += 512  # as if the archive had been rewritten keeping its size and modification time
    with open(kept, "wb") as f:
        f.write(listings.encode_listing(archive, spool.stamp([archive]), listed))
    (out / "validation-00000-of-00002").unlink()
    result = run_cli("convert", "--from", copy, "--output-dir", out, *layout_args(ilsvrc))
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [
        f"error: {archive}: its content differs from the listing an earlier run kept of it, although its size and "
        "modification time are the same; that listing is removed: run the same command again"]
    assert not os.path.exists(kept)
    again = convert(ilsvrc, copy, out)
    assert again["shards_written"] >= 1
    assert run_cli("verify", out).exit_code == 0


def test_a_damaged_listing_is_ignored_and_the_archives_decompressed(tmp_path, ilsvrc, spooled_splits):
    copy, out = written(ilsvrc, tmp_path, "hf"), tmp_path / "out"
    convert(ilsvrc, copy, out)
    kept = sorted((out / LISTINGS_NAME).iterdir())
    kept[0].write_bytes(zlib.compress(b"{}\nnot a listing"))
    kept[-1].write_bytes(kept[-1].read_bytes()[:-10])
    spooled_splits.clear()
    again = convert(ilsvrc, copy, out)
    assert sorted(spooled_splits) == ["train", "validation"] and again["shards_written"] == 0


def test_the_free_space_message_shows_sizes_in_units_that_tell_them_apart(tmp_path, ilsvrc, monkeypatch):
    assert [spool.human_bytes(n) for n in (999, 50e6, 63e6, 1.4e9, 140e9)] == [
        "999 bytes", "50 MB", "63 MB", "1.4 GB", "140 GB"]  # 50 and 63 MB were both "0.1 GB"
    copy, out = written(ilsvrc, tmp_path, "hf"), tmp_path / "out"
    usage = spool.shutil.disk_usage(tmp_path)
    monkeypatch.setattr(spool.shutil, "disk_usage", lambda path: usage._replace(free=63_000))  # a disk nearly full
    needed = sum(p.stat().st_size for p in (copy / "data").glob("*_images*.tar.gz") if "test" not in p.name)
    result = run_cli("convert", "--from", copy, "--output-dir", out, *layout_args(ilsvrc))
    assert result.exit_code == 1 and result.stderr.strip().splitlines() == [
        f"error: {out}: 63 kB free; the train and validation archives decompress to at least "
        f"{spool.human_bytes(needed)}, kept there until the build ends; free space or choose another --output-dir"]
