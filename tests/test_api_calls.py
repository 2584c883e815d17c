"""imagenet_build.api hands each option to the stage that runs it, as given or by its default, paths as strings;
its result types and write_arrays are the stages' own, imported when first named (test_api.py runs the verbs)."""

from pathlib import Path

import pytest

from imagenet_build import api
from imagenet_build.infra.errors import UsageError


def spied(monkeypatch, module, name):
    """Replace `module.name` with a spy keeping what it was called with; returns that record."""
    import importlib

    calls = []
    monkeypatch.setattr(importlib.import_module(module), name,
                        lambda *args, **kwargs: calls.append((args, kwargs)) or "result")
    return calls


def test_verify_hands_on_every_option_and_its_defaults(monkeypatch):
    calls = spied(monkeypatch, "imagenet_build.verify.run", "verify")
    assert api.verify(Path("b"), index_dir=Path("i"), quick=True, deep=False, expect_imagenet=True, workers=3) == \
        "result"
    assert api.verify("b") == "result"
    assert calls == [((Path("b"),), dict(index_dir="i", quick=True, deep=False, expect_imagenet=True, workers=3)),
                     (("b",), dict(index_dir=None, quick=False, deep=False, expect_imagenet=False, workers=0))]


def test_index_hands_on_every_option_and_its_defaults(monkeypatch):
    calls = spied(monkeypatch, "imagenet_build.format.dali_index", "index_shards")
    api.index(Path("a"), index_dir=Path("i"), workers=2)
    api.index(["a", Path("b")])
    assert calls == [((("a",),), dict(index_dir="i", workers=2)), ((("a", "b"),), dict(index_dir=None, workers=0))]


def test_report_hands_on_every_option_and_its_defaults(monkeypatch):
    calls = spied(monkeypatch, "imagenet_build.report.run", "report")
    api.report(Path("b"), Path("p.html"), per_class=3, classes="all", verify=True, workers=2)
    api.report("b")
    assert calls == [(("b", "p.html"), dict(per_class=3, classes="all", run_verify=True, workers=2)),
                     (("b", None), dict(per_class=api.PER_CLASS, classes=None, run_verify=False, workers=0))]


def test_convert_takes_one_path_or_several_where_an_option_repeats(monkeypatch):
    seen = []
    monkeypatch.setattr("imagenet_build.writer.run.convert", lambda request: seen.append(request) or "result")
    monkeypatch.setattr("imagenet_build.request.convert_request", lambda options: options)
    api.convert(Path("out"), from_paths=Path("a.tar"), spark_conf="spark.x=1", train_dir=Path("t"))
    assert (seen[0].output_dir, seen[0].from_paths, seen[0].spark_conf, seen[0].train_dir) == (
        "out", ("a.tar",), ("spark.x=1",), "t")


def test_an_option_convert_does_not_have_is_named_with_those_it_has():
    import dataclasses

    from imagenet_build.request import ConvertOptions

    with pytest.raises(UsageError) as refused:
        api.convert("out", train_dri="t", zzz=1)
    known = ", ".join(sorted(field.name for field in dataclasses.fields(ConvertOptions)))
    assert str(refused.value) == f"convert has no option 'train_dri'; its options: {known}"


def test_the_result_types_and_write_arrays_are_the_stages_own():
    from imagenet_build.format.dali_index import IndexResult
    from imagenet_build.report.run import ReportResult
    from imagenet_build.verify.report import VerifyResult
    from imagenet_build.writer.arrays import write_arrays
    from imagenet_build.writer.summary import Summary

    assert (api.ConvertResult, api.IndexResult, api.ReportResult, api.VerifyResult, api.write_arrays) == (
        Summary, IndexResult, ReportResult, VerifyResult, write_arrays)
    with pytest.raises(AttributeError) as missing:
        api.nothing_here  # noqa: B018
    assert str(missing.value) == "module 'imagenet_build.api' has no attribute 'nothing_here'"
