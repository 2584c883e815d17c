"""writer/spooling.py: the copy's spool for one convert, the one place the writer asks a copy for it. A killed
run's spool goes first whatever the copy; a copy read in place gets none; a spooled copy's goes into the output
folder (a temporary folder for an object store) and is removed at the end, an error's end too."""

import os
import subprocess
import sys
import tempfile

import pytest

from imagenet_build.format.naming import SPOOL_PREFIX
from imagenet_build.infra.workers import Workers
from imagenet_build.request import ConvertOptions, convert_request
from imagenet_build.writer.spooling import copy_spool


def request(copy, out):
    return convert_request(ConvertOptions(output_dir=str(out), from_paths=(str(copy),), train_shards=1,
                                          validation_shards=1, layout_threads=1, workers=1))


def spools(folder):
    return sorted(name for name in os.listdir(folder) if name.startswith(SPOOL_PREFIX))


@pytest.mark.parametrize("kind", ["ilsvrc", "hf"])
def test_a_killed_runs_spool_goes_first_whatever_the_copy(small_copy, tmp_path, kind):
    out = tmp_path / "out"
    out.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (out / f"{SPOOL_PREFIX}{dead.pid}-train-abc").mkdir()
    (out / f"{SPOOL_PREFIX}{os.getpid()}-train-def").mkdir()  # a live run's: left alone
    with copy_spool(request(small_copy(kind), out)) as spool:
        assert spools(out) == [f"{SPOOL_PREFIX}{os.getpid()}-train-def"]
        assert (spool is None) == (kind == "ilsvrc")


def test_a_spooled_copys_spool_lies_in_the_output_and_goes_at_the_end_even_an_errors(small_copy, tmp_path):
    out = tmp_path / "out"
    made = request(small_copy("hf"), out)
    with pytest.raises(RuntimeError, match="a failed build"):
        with copy_spool(made) as spool, Workers(1) as pool:
            spool.decompress(pool)
            assert [name.rsplit("-", 1)[0] for name in spools(out)] == [
                f"{SPOOL_PREFIX}{os.getpid()}-train", f"{SPOOL_PREFIX}{os.getpid()}-validation"]
            raise RuntimeError("a failed build")
    assert not out.exists()  # the spool and the output folder made only for it


def test_an_object_store_outputs_spool_goes_to_the_temporary_folder(small_copy, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "temp"))
    made = request(small_copy("hf"), "memory://spooling-test/out")
    with copy_spool(made) as spool, Workers(1) as pool:
        spool.decompress(pool)
        assert len(spools(tmp_path / "temp")) == 2
    assert not (tmp_path / "temp").exists()  # made for the spool alone: gone with it
