"""The promises under pressure: a disk full at the final manifest, and what verify says of a build that is not
complete (stale inputs, two writers, lying inputs, bad inputs of every verb and signals: the files beside this).

Each case runs the verb as a user would and asserts the exit code, one `error:` line on
stderr, a JSON document on stdout with --json, no traceback, the inputs untouched, and
nothing under a final name that a clean build would not write.
"""

import errno
import json
import re
import shutil
import socket

from conftest import (
    run_cli,
    run_process,
    sample_args,
    tree_digest,
)
from imagenet_build.infra import write_door
from run_helpers import hold_lock

# ------------------------------------------------------------------ the final manifest write fails


def test_out_of_space_at_the_final_manifest_keeps_the_in_progress_one(sample_dir, converted, tmp_path, monkeypatch):
    real_create = write_door._create  # every temporary file is made there

    def full_disk_for_the_final_manifest(path, *args, **kwargs):
        f = real_create(path, *args, **kwargs)
        if "manifest.json" in str(path):
            real_write = f.write

            def write(data):
                if b'"complete": true' in data:
                    real_write(data[: len(data) // 2])
                    raise OSError(errno.ENOSPC, "No space left on device", str(path))
                return real_write(data)

            f.write = write
        return f

    monkeypatch.setattr(write_door, "_create", full_disk_for_the_final_manifest)
    out = tmp_path / "out"
    result = run_cli(*sample_args(sample_dir, out, "--workers", 1))
    assert result.exit_code == 1 and "No space left on device" in result.stderr
    assert result.stderr.count("\n") == 1
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["complete"] is False and manifest["shards"]
    assert not list(out.rglob(".*.tmp"))
    monkeypatch.undo()
    rerun = run_cli(*sample_args(sample_dir, out, "--workers", 1, "--json"))
    assert rerun.exit_code == 0 and json.loads(rerun.stdout)["shards_kept"] >= len(manifest["shards"])
    assert tree_digest(out) == tree_digest(converted)


# ------------------------------------------------------------------ what verify says of a build that is not complete


def test_a_convert_stopped_by_bad_input_failed_and_verify_says_so(sample_copy, tmp_path):
    """verify said "convert was interrupted" of a build whose convert had failed on a broken image."""
    image = sorted((sample_copy / "validation").glob("*.JPEG"))[2]  # written after every train shard
    image.write_bytes(image.read_bytes()[:300])
    out = tmp_path / "out"
    result = run_cli(*sample_args(sample_copy, out, "--workers", 1))
    assert result.exit_code == 1 and result.stderr.startswith("error: ") and image.name in result.stderr
    error = result.stderr.strip()[len("error: "):]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["complete"] is False and manifest["ended"] == "failed" and manifest["error"] == error
    verified = run_cli("verify", out, "--json")
    assert verified.exit_code == 1
    messages = [p["message"] for p in json.loads(verified.stdout)["problems"] if p["file"] == "manifest.json"]
    assert messages == [f"the build is not complete: convert failed: {error}"]


def test_verify_of_a_folder_a_convert_is_writing_names_the_convert(converted, tmp_path):
    """verify during a running convert called its temporary files strays."""
    out = tmp_path / "out"
    shutil.copytree(converted, out)
    (out / ".train-00001-of-00004.4242.tmp").write_bytes(b"half a shard")
    for held in (out, out / "dali_idx"):  # convert's lock on the output, index's on the index folder
        holder = hold_lock(held)
        try:
            result = run_process("verify", out, "--json")
        finally:
            holder.kill()
            holder.wait()
        assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
        assert re.fullmatch(
            rf"error: {re.escape(str(held))}: imagenet-build convert \(pid {holder.pid} on "
            rf"{re.escape(socket.gethostname())}, since \d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d UTC\) "
            r"is writing this folder; verify when it ends", result.stderr.strip()), result.stderr
        assert json.loads(result.stdout)["ok"] is False
    (out / ".train-00001-of-00004.4242.tmp").unlink()
    assert run_process("verify", out).returncode == 0  # the lock files the holders left are nobody's


