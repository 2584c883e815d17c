"""One writer per folder: a second writer refused naming the holder, a killed run's lock and spool never in the
way of the next."""

import os
import shutil
import subprocess
import sys

import pytest

from conftest import (
    run_cli,
    run_process,
    sample_args,
    tree_digest,
)
from imagenet_build.infra.lock import LOCK_NAME, FolderLock
from run_helpers import hold_lock


def test_a_second_writer_is_refused_naming_the_holder(sample_dir, converted, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(converted, out)
    before = tree_digest(out)
    holder = hold_lock(out)
    try:
        result = run_process(*sample_args(sample_dir, out, "--workers", 1))
        assert result.returncode == 1
        assert result.stderr.count("\n") == 1 and f"pid {holder.pid}" in result.stderr
        assert "in use by another imagenet-build" in result.stderr
        indexed = run_process("index", out)
        assert indexed.returncode == 0  # index writes dali_idx/, which the holder has not locked
        holder_idx = hold_lock(out / "dali_idx")
        try:
            refused = run_process("index", out)
            assert refused.returncode == 1 and f"pid {holder_idx.pid}" in refused.stderr
            assert run_process(*sample_args(sample_dir, out, "--workers", 1)).returncode == 1
        finally:
            holder_idx.kill()
            holder_idx.wait()
    finally:
        holder.kill()
        holder.wait()
    assert {k: v for k, v in tree_digest(out).items() if LOCK_NAME not in k} == before
    # the holders died (kill -9 at that): the kernel released their locks, the files left behind stay harmless
    assert run_process(*sample_args(sample_dir, out, "--workers", 1)).returncode == 0
    assert run_process("verify", out).returncode == 0


@pytest.mark.slow
def test_two_converts_into_one_folder_never_mix_layouts(sample_dir, tmp_path):
    for attempt in range(3):
        out = tmp_path / f"out{attempt}"
        procs = []
        for shards in (4, 8):
            args = sample_args(sample_dir, out, "--workers", 1, train=True, validation=False)
            args[args.index("--train-shards") + 1] = str(shards)
            procs.append(subprocess.Popen([sys.executable, "-m", "imagenet_build", *args],
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        results = [(p.wait(), p.stderr.read()) for p in procs]
        codes = sorted(code for code, _ in results)
        assert codes[0] == 0, results
        layouts = {p.name.rsplit("-of-", 1)[1] for p in out.glob("train-*")}
        assert len(layouts) == 1, layouts
        for code, err in results:
            if code:
                assert err.count("\n") == 1 and ("in use by another" in err or "other options" in err), err
        assert run_process("verify", out).returncode == 0


def test_lock_file_left_by_a_killed_run_does_not_block_or_fail_verify(sample_dir, converted, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(converted, out)
    (out / LOCK_NAME).write_text('{"pid": 1, "host": "elsewhere"}')
    assert run_cli("verify", out).exit_code == 0
    assert run_cli(*sample_args(sample_dir, out, "--workers", 1)).exit_code == 0
    assert not (out / LOCK_NAME).exists()


def test_a_killed_runs_spool_is_removed_by_any_rerun(sample_dir, converted, tmp_path):
    """A .tar.gz run killed with kill -9 leaves its spool; the next run into that folder removes it even
    when it reads another copy (only a run that spooled again used to), so verify finds the folder clean.
    A live run's spool is left alone."""
    from imagenet_build.format.naming import SPOOL_PREFIX

    out = tmp_path / "out"
    shutil.copytree(converted, out)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = out / f"{SPOOL_PREFIX}{dead.pid}-train-abc"
    live = out / f"{SPOOL_PREFIX}{os.getpid()}-train-def"
    for spool in (stale, live):
        spool.mkdir()
        (spool / "0000-train_images_0.tar").write_bytes(b"x" * 1000)
    assert run_cli(*sample_args(sample_dir, out, "--workers", 1)).exit_code == 0
    assert not stale.exists() and live.exists()
    shutil.rmtree(live)
    assert run_cli("verify", out).exit_code == 0


def test_lock_is_released_and_leaves_no_folder_it_made(tmp_path):
    folder = tmp_path / "new"
    with FolderLock(folder):
        assert (folder / LOCK_NAME).exists()
    assert not folder.exists()
    with FolderLock(tmp_path / "a" / "b" / "c"):  # every folder it made, as far up as they stay empty
        (tmp_path / "a" / "kept").write_text("written meanwhile")
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["kept"]
