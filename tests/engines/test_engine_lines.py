"""The engines speak one line, as every verb does: Beam's refusal of its options before anything is written, a stop
of the whole process group (the engines' workers and JVMs end with the driver) without their threads' tracebacks,
and no library's log records on the way."""

import json
import subprocess
import sys

import pytest
from test_engines import MORE_SHARDS, engine_args, receipts, shards_of

from conftest import Run, run_process, sample_args, wait_until_gone


@pytest.mark.parametrize("options,said", [
    ("--runner", "argument --runner: expected one argument"),
    ("--direct_num_workers=abc", "argument --direct_num_workers: invalid int value: 'abc'"),
])
def test_beams_refusal_of_its_options_is_one_line_before_anything_is_written(sample_dir, tmp_path, options, said):
    pytest.importorskip("apache_beam")
    out = tmp_path / "out"
    result = run_process(*sample_args(sample_dir, out, "--runner", "beam", "--beam-options", options, "--json"))
    line = f"--beam-options: {said} (see: imagenet-build convert --help)"
    assert result.returncode == 2
    assert result.stderr.splitlines() == [f"error: {line}"]
    assert json.loads(result.stdout)["error"] == line
    assert not out.exists()


STOPPED = {"beam": [], "spark": ["--spark-master", "local[2]"]}  # local[2]: Spark's JVM and its Python workers


@pytest.mark.slow
@pytest.mark.parametrize("engine", sorted(STOPPED))
def test_an_engine_stopped_with_its_process_group_says_one_line(engine, sample_dir, tmp_path):
    """SIGTERM to the process group (`timeout`, a batch system's cancel): Beam's worker processes, Spark's JVM and
    workers end with the driver; their broken channels are no traceback (gRPC's reader threads, pyspark's
    accumulator server), the line is the stop's, and nothing is left running."""
    out = tmp_path / "out"
    with Run(*sample_args(sample_dir, out, *MORE_SHARDS), *engine_args(engine), *STOPPED[engine], "--json") as run:
        run.wait_for(lambda r: receipts(out), seconds=180)
        code, stdout, err = run.signal("sigterm-group")
        left = wait_until_gone(run.processes(), seconds=60)
    assert code == 1 and left == []
    assert err.splitlines() == ["error: interrupted; run the same command again to resume"], err
    assert json.loads(stdout)["error"] == "interrupted; run the same command again to resume"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["ended"] == "interrupted"
    assert shards_of(out) == sorted(entry["name"] for entry in manifest["shards"])


def test_libraries_log_records_are_not_the_commands_to_print():
    """gcsfs logs an error for every object it opens without Google's default credentials; a Beam module logs a
    warning when imported (and so sets up Python's logging on stderr): the command prints neither."""
    code = ("import logging, sys\n"
            "from imagenet_build.cli.group import _library_logs_off\n"
            "if sys.argv[1] == 'command': _library_logs_off()\n"
            "logging.getLogger('gcsfs.extended_gcsfs').error('Could not determine bucket type for bucket name b')\n"
            "logging.warning('apitools not found')\n"
            "logging.getLogger('apache_beam.runners.worker.data_plane').error('Failed to read inputs')\n")
    said = [subprocess.run([sys.executable, "-c", code, how], capture_output=True, text=True) for how in
            ("command", "plain Python")]
    assert said[0].returncode == 0 and said[0].stderr == ""
    assert said[1].stderr.splitlines() == ["Could not determine bucket type for bucket name b",
                                           "WARNING:root:apitools not found",
                                           "ERROR:apache_beam.runners.worker.data_plane:Failed to read inputs"]
