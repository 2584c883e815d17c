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
    calls = spied(monkeypatch, "imagenet_build.verify.verify_run", "verify")
    assert api.verify(Path("b"), index_dir=Path("i"), quick=True, deep=False, expect_imagenet=True, workers=3) == \
        "result"
    assert api.verify("b") == "result"
    assert calls == [(("b",), dict(index_dir="i", quick=True, deep=False, expect_imagenet=True, workers=3)),
                     (("b",), dict(index_dir=None, quick=False, deep=False, expect_imagenet=False, workers=0))]


def test_index_hands_on_every_option_and_its_defaults(monkeypatch):
    calls = spied(monkeypatch, "imagenet_build.indexing.index_run", "index_shards")
    api.index(Path("a"), index_dir=Path("i"), workers=2)
    api.index(["a", Path("b")])
    assert calls == [((("a",),), dict(index_dir="i", workers=2)), ((("a", "b"),), dict(index_dir=None, workers=0))]


def test_report_hands_on_every_option_and_its_defaults(monkeypatch):
    calls = spied(monkeypatch, "imagenet_build.report.report_run", "report")
    api.report(Path("b"), Path("p.html"), per_class=3, classes="all", verify=True, workers=2)
    api.report("b")
    assert calls == [(("b", "p.html"), dict(per_class=3, classes="all", run_verify=True, workers=2)),
                     (("b", None), dict(per_class=api.PER_CLASS, classes=None, run_verify=False, workers=0))]


def test_convert_takes_one_path_or_several_where_an_option_repeats(monkeypatch):
    seen = []
    monkeypatch.setattr("imagenet_build.writer.convert_run.convert", lambda request: seen.append(request) or "result")
    monkeypatch.setattr("imagenet_build.request.convert_request", lambda options: options)
    api.convert(Path("out"), from_paths=Path("a.tar"), spark_conf="spark.x=1", train_dir=Path("t"))
    options = seen[0]
    assert (options.output_dir, options.from_paths, options.train_dir) == ("out", ("a.tar",), "t")
    assert dict(options.engine_options)["spark_conf"] == ("spark.x=1",)  # each engine's options apart, as given


def test_the_result_types_and_write_arrays_are_the_stages_own():
    from imagenet_build.indexing.index_run import IndexResult
    from imagenet_build.report.report_run import ReportResult
    from imagenet_build.verify.verify_result import VerifyResult
    from imagenet_build.writer.arrays import write_arrays
    from imagenet_build.writer.summary import ConvertSummary

    assert (api.ConvertResult, api.IndexResult, api.ReportResult, api.VerifyResult, api.write_arrays) == (
        ConvertSummary, IndexResult, ReportResult, VerifyResult, write_arrays)
    with pytest.raises(AttributeError) as missing:
        api.nothing_here  # noqa: B018
    assert str(missing.value) == "module 'imagenet_build.api' has no attribute 'nothing_here'"


# ------------------------------------------------------------------ what the command line never gives: wrong types


NOT_PATHS = [(b"out", "bytes b'out'"), (None, "None"), (3, "int 3"), (1.5, "float 1.5"), (True, "bool True")]
NOT_FLAGS = [("no", "str 'no'"), (1, "int 1"), (None, "None"), ([], "list []")]


def convert_flags():
    import typing

    from imagenet_build.engines import ENGINE_OPTIONS
    from imagenet_build.request import ConvertOptions

    return sorted([name for name, kind in typing.get_type_hints(ConvertOptions).items() if kind is bool]
                  + [option.name for option in ENGINE_OPTIONS if option.flag])


def test_convert_names_its_paths_and_flags_from_its_options():
    from imagenet_build.request import PATH_OPTIONS

    assert convert_flags() == ["classes_from_folders", "exif_transpose", "overwrite", "resize_larger_only",
                               "shared_filesystem", "verify_inputs"]
    assert "index_dir" in PATH_OPTIONS and "from_paths" in PATH_OPTIONS and "runner" not in PATH_OPTIONS


def calls_given(value):
    """(argument, call) for every path and flag argument of the API, with `value` given there."""
    from imagenet_build.request import PATH_OPTIONS

    yield "output_dir", lambda: api.convert(value, train_dir="t")
    for name in PATH_OPTIONS[1:]:
        if value is not None or name == "from_paths":  # None: an optional path's default
            yield name, lambda name=name: api.convert("out", **{name: value})
    yield "from_paths[1]", lambda: api.convert("out", from_paths=["a", value])
    yield "folder", lambda: api.verify(value)
    yield "inputs", lambda: api.index(value)
    yield "inputs[0]", lambda: api.index([value])
    yield "folder", lambda: api.report(value)
    yield "output_dir", lambda: api.write_arrays([], [], value)
    if value is not None:
        yield "index_dir", lambda: api.verify("b", index_dir=value)
        yield "index_dir", lambda: api.index("a", index_dir=value)
        yield "output", lambda: api.report("b", output=value)
        yield "index_dir", lambda: api.write_arrays([], [], "out", index_dir=value)


@pytest.mark.parametrize("value,shown", NOT_PATHS, ids=[shown for _, shown in NOT_PATHS])
def test_a_path_given_as_bytes_none_or_a_number_is_a_usage_error_naming_it(value, shown, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # where a call that missed its check would write
    for argument, call in calls_given(value):
        with pytest.raises(UsageError) as refused:
            call()
        assert list(tmp_path.iterdir()) == []
        what = "a path or a list of paths" if argument in ("inputs", "from_paths") else "a path (a str or pathlib.Path)"
        assert str(refused.value) == f"{argument} must be {what}, not {shown}", argument


@pytest.mark.parametrize("value,shown", NOT_FLAGS, ids=[shown for _, shown in NOT_FLAGS])
def test_a_flag_given_anything_but_true_or_false_is_a_usage_error_naming_it(value, shown, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    calls = [(flag, lambda flag=flag: api.convert("out", train_dir="t", **{flag: value})) for flag in convert_flags()]
    calls += [(flag, lambda flag=flag: api.verify("b", **{flag: value})) for flag in ("quick", "deep",
                                                                                       "expect_imagenet")]
    calls += [("verify", lambda: api.report("b", verify=value)),
              ("lossless", lambda: api.write_arrays([], [], "out", lossless=value))]
    for argument, call in calls:
        with pytest.raises(UsageError) as refused:
            call()
        assert str(refused.value) == f"{argument} must be True or False, not {shown}", argument


class BytesPath:
    """An os.PathLike whose path is bytes: no path the command line would give either."""

    def __fspath__(self):
        return b"out"

    def __repr__(self):
        return "BytesPath()"


def test_a_path_like_of_bytes_is_refused_where_one_path_or_several_are_taken(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for argument, call in (("output_dir", lambda: api.convert(BytesPath(), train_dir="t")),
                           ("from_paths", lambda: api.convert("out", from_paths=BytesPath())),
                           ("inputs", lambda: api.index(BytesPath())), ("inputs[0]", lambda: api.index([BytesPath()]))):
        with pytest.raises(UsageError) as refused:
            call()
        assert str(refused.value) == f"{argument} must be a path (a str or pathlib.Path), not BytesPath BytesPath()"
    assert list(tmp_path.iterdir()) == []


def test_a_wrong_value_is_shown_cut_short():
    for value, shown in ((b"x" * 37, f"bytes {b'x' * 37!r}"),  # a repr of 40 characters: whole
                         (b"x" * 38, f"bytes {repr(b'x' * 38)[:37]}..."),  # of 41: cut to 40
                         (list(range(30)), f"list {repr(list(range(30)))[:37]}...")):
        with pytest.raises(UsageError) as refused:
            api.verify(value)
        assert str(refused.value) == f"folder must be a path (a str or pathlib.Path), not {shown}"


def test_an_unknown_keyword_stays_pythons_type_error():
    for call in (lambda: api.convert("out", train_dri="t"), lambda: api.verify("b", quik=True),
                 lambda: api.index("a", index="i"),
                 lambda: api.report("b", page="p"), lambda: api.write_arrays([], [], "out", losless=True)):
        with pytest.raises(TypeError, match="unexpected keyword argument"):
            call()
