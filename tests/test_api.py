"""imagenet_build.api: convert, verify, index and report from Python with the command line's options, returning
what --json prints, raising the tool's own error with the command's line; the command line a caller of it."""

import errno
import json
import subprocess
import sys

import pytest

from conftest import run_cli, sample_args, tree_digest
from imagenet_build import api
from imagenet_build.infra.errors import BuildError, UsageError

TIMED = ("seconds", "images_per_second", "records_per_second", "mb_per_second")


def untimed(document):
    """A result without the figures that differ from run to run (times, rates) and without the version --json adds."""
    if isinstance(document, dict):
        return {k: untimed(v) for k, v in document.items() if k not in TIMED + ("imagenet_build_version",)}
    if isinstance(document, list):
        return [untimed(v) for v in document]
    return document


def sample_options(sample):
    """sample_args' options as the API takes them."""
    return dict(train_dir=sample / "train", validation_dir=sample / "validation", labels_file=sample / "labels.txt",
                validation_labels_file=sample / "validation_labels.txt", bounding_box_file=sample / "bboxes.csv",
                train_shards=4, validation_shards=2, layout_threads=2, workers=1)


def test_convert_verify_index_report_give_what_the_verbs_print(sample_dir, converted, tmp_path):
    """Each function, paths given as pathlib.Paths, writes the verb's bytes and returns its --json document."""
    summary = api.convert(tmp_path / "out", **sample_options(sample_dir))
    assert tree_digest(tmp_path / "out") == tree_digest(converted)
    assert summary["ok"] is True and summary["splits"]["train"]["records"] == 48
    cli = run_cli(*sample_args(sample_dir, tmp_path / "cli", "--workers", 1, "--json"))
    assert untimed(json.loads(cli.stdout)) == untimed(summary) | {"output_dir": str(tmp_path / "cli"),
                                                                  "manifest": str(tmp_path / "cli/manifest.json")}

    result = api.verify(tmp_path / "out", deep=True, workers=1)
    cli = run_cli("verify", tmp_path / "out", "--deep", "--workers", 1, "--json")
    assert result["ok"] is True and untimed(json.loads(cli.stdout)) == untimed(result)

    shard = tmp_path / "out" / "train-00000-of-00004"
    indexed = api.index(shard, index_dir=tmp_path / "idx", workers=1)
    assert indexed["ok"] and indexed["refused"] == [] and indexed["records"] == 12
    assert (tmp_path / "idx" / f"{shard.name}.idx").read_bytes() == (
        converted / "dali_idx" / f"{shard.name}.idx").read_bytes()

    page = api.report(converted, tmp_path / "page.html", per_class=2, classes="all")
    assert page["ok"] and page["problems"] == [] and page["builds"] == [str(converted)]
    assert page["page"] == str(tmp_path / "page.html") and (tmp_path / "page.html").stat().st_size > 0


def test_a_problem_in_the_data_is_in_the_result_not_raised(build, tmp_path):
    (build / "dali_idx" / "train-00001-of-00004.idx").write_text("0 16\n")
    result = api.verify(build, quick=True, workers=1)
    assert result["ok"] is False and {p["check"] for p in result["problems"]} == {"index"}
    broken = tmp_path / "broken.tfrecord"
    broken.write_bytes((build / "train-00000-of-00004").read_bytes()[:100])
    indexed = api.index([broken], workers=1)
    assert indexed["ok"] is False and [r["file"] for r in indexed["refused"]] == [str(broken)]
    assert not (tmp_path / "dali_idx").exists()


@pytest.mark.parametrize("call, error, line", [
    (lambda out: api.convert(out), UsageError, "nothing to convert: give --from PATH"),
    (lambda out: api.convert(out, train_dir=out, train_shards=0), UsageError,
     "--train-shards must be a whole number of at least 1, not 0"),
    (lambda out: api.convert(out, train_dir=out, workers=-1), UsageError,
     "--workers must be a whole number of at least 0, not -1"),
    (lambda out: api.convert(out, train_dir=out, layout_threads="2"), UsageError,
     "--layout-threads must be a whole number of at least 1, not '2'"),
    (lambda out: api.convert(out, train_dir=out, on_error="ignore"), UsageError,
     "--on-error must be fail or skip, not 'ignore'"),
    (lambda out: api.convert(out / "o", from_paths=out / "nowhere.tar"), BuildError, "nowhere.tar: not found"),
    (lambda out: api.verify(out, quick=True, deep=True), UsageError, "--quick and --deep exclude each other"),
    (lambda out: api.verify(out / "nowhere"), BuildError, "nowhere: not a folder"),
    (lambda out: api.verify(out, workers=-2), UsageError, "--workers must be a whole number of at least 0, not -2"),
    (lambda out: api.index(out, workers=True), UsageError, "--workers must be a whole number of at least 0, not True"),
    (lambda out: api.report(out, classes=0), UsageError,
     "--classes takes a number of classes (1 or more) or 'all', not 0"),
    (lambda out: api.report(out, classes="some"), UsageError, "--classes takes a number of classes"),
    (lambda out: api.report(out, per_class=0), UsageError, "--per-class must be a whole number of at least 1, not 0"),
])
def test_a_mistake_is_the_tools_own_error_with_the_commands_line(tmp_path, call, error, line):
    with pytest.raises(BuildError) as raised:
        call(tmp_path)
    assert isinstance(raised.value, error) and isinstance(raised.value, UsageError) == (error is UsageError)
    assert line in str(raised.value) and "\n" not in str(raised.value)


def test_the_file_systems_error_is_a_build_error_with_the_commands_line(converted, tmp_path, monkeypatch):
    from imagenet_build.infra import write_door

    def full(path, data, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(write_door, "write_bytes", full)
    page = tmp_path / "page.html"
    with pytest.raises(BuildError) as raised:
        api.report(converted, page)
    assert str(raised.value) == f"{page}: No space left on device"
    assert isinstance(raised.value.__cause__, OSError)
    cli = run_cli("report", converted, "-o", page)
    assert cli.exit_code == 1 and cli.stderr == f"error: {page}: No space left on device\n"


@pytest.mark.parametrize("verb, args, called", [
    ("convert", ["--output-dir", "OUT", "--from", "A", "--from", "B", "--resize-all", "--resize", "shorter:9"],
     {"output_dir": "OUT", "from_paths": ("A", "B"), "resize_larger_only": False, "resize": "shorter:9"}),
    ("verify", ["DIR", "--deep", "--workers", "3"], {"folder": "DIR", "deep": True, "workers": 3, "quick": False}),
    ("index", ["A", "B", "--index-dir", "I"], {"inputs": ("A", "B"), "index_dir": "I", "workers": 0}),
    ("report", ["DIR", "--classes", "all", "--verify"], {"folder": "DIR", "classes": "all", "verify": True,
                                                          "per_class": 8}),
])
def test_the_command_line_calls_the_api(monkeypatch, verb, args, called):
    """The verb parses and prints; what it runs is the API's function, given every option."""
    import inspect

    seen, signature = {}, inspect.signature(getattr(api, verb))

    def spy(*given, **options):
        seen.update(signature.bind(*given, **options).arguments)
        seen.update(seen.pop("options", {}))
        raise BuildError("stopped here")

    monkeypatch.setattr(api, verb, spy)
    result = run_cli(verb, *args)
    assert result.exit_code == 1 and result.stderr == "error: stopped here\n"
    assert {name: seen[name] for name in called} == called


def test_importing_the_api_imports_no_verb(tmp_path):
    """The errors and convert's options (request.py, which names the engines): no verb, no engine's library."""
    code = ("import sys, imagenet_build.api as api\n"
            "loaded = sorted(m for m in sys.modules if m.startswith('imagenet_build.'))\n"
            "verbs = ('cli', 'writer', 'verify', 'report.', 'readers', 'trainercheck', 'sources', 'encode', 'tools',\n"
            "         'catalog')\n"
            "assert not [m for m in loaded if m.startswith(tuple('imagenet_build.' + v for v in verbs))], loaded\n"
            "assert not [m for m in ('apache_beam', 'pyspark', 'numpy', 'PIL') if m in sys.modules]\n"
            "from imagenet_build.api import ConvertResult, IndexResult, ReportResult, VerifyResult, write_arrays\n"
            "import imagenet_build\n"
            "assert write_arrays.__module__ == 'imagenet_build.writer.arrays'\n"
            "assert set(api.__all__) <= set(dir(api)) | set(api._LAZY)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
