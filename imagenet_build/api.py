"""imagenet-build from Python: convert, verify, index and report, with the command line's options.

The package's top names these functions too (`imagenet_build.convert` is `imagenet_build.api.convert`).
Each takes its verb's options as keyword parameters by their names (`--train-dir` is `train_dir`, `--from` is
`from_paths`), convert's with request.ConvertOptions' defaults, checks them as the command line does (the same
request: for convert `ConvertOptions` -> `convert_request`), and returns what the verb's `--json` prints, typed.
The command line (cli/) is a caller of these. A user mistake or bad input raises the tool's own error,
`BuildError` (`UsageError` for options that do not go together), whose message is the line the command prints
after `error:`. Nothing heavy is imported until a function runs (docs/api.md): this module imports the errors
and the defaults (request.py, which imports no engine's library).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Optional, Union

from imagenet_build.engines import ENGINE_DEFAULTS, ENGINE_OPTION_NAMED, option_value  # each declared by its engine
from imagenet_build.infra.errors import BuildError, PathLike, UsageError, check_flag, check_path, check_paths, one_line
from imagenet_build.report import PER_CLASS
from imagenet_build.request import DEFAULTS  # convert's defaults, stated once there

if TYPE_CHECKING:
    from imagenet_build.indexing.index_run import IndexResult
    from imagenet_build.report.report_run import ReportResult
    from imagenet_build.verify.verify_result import VerifyResult
    from imagenet_build.writer.arrays import write_arrays
    from imagenet_build.writer.summary import ConvertSummary as ConvertResult

__all__ = ["BuildError", "ConvertResult", "IndexResult", "ReportResult", "UsageError", "VerifyResult", "convert",
           "index", "report", "verify", "write_arrays"]

# What the functions return (and write_arrays), imported when first named: importing this module stays cheap
_LAZY = {
    "ConvertResult": ("imagenet_build.writer.summary", "ConvertSummary"),
    "IndexResult": ("imagenet_build.indexing.index_run", "IndexResult"),
    "ReportResult": ("imagenet_build.report.report_run", "ReportResult"),
    "VerifyResult": ("imagenet_build.verify.verify_result", "VerifyResult"),
    "write_arrays": ("imagenet_build.writer.arrays", "write_arrays"),
}


if not TYPE_CHECKING:  # mypy sees the imports above, and refuses a name this module does not have

    def __getattr__(name: str) -> Any:
        if name not in _LAZY:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        import importlib

        module, attribute = _LAZY[name]
        return getattr(importlib.import_module(module), attribute)


@contextlib.contextmanager
def _tool_errors() -> Iterator[None]:
    """The tool's own errors as they are; the file system's as a BuildError with the line the command prints."""
    try:
        yield
    except BuildError:
        raise
    except OSError as e:
        raise BuildError(one_line(e)) from e


def _path(value: Any, argument: str) -> Any:
    """An optional path, given as a str or a pathlib.Path (any os.PathLike), as the command line gives it: a str;
    None where not given. Anything else is a UsageError naming the argument."""
    return None if value is None else check_path(value, argument)


def _convert_options(given: dict[str, Any]) -> dict[str, Any]:
    """convert's options by name, paths as strings and flags True or False (request.ConvertOptions' types), the
    engines' gathered into `engine_options` (as each engine declares them); a UsageError naming the first that is
    neither."""
    import typing

    from imagenet_build.request import PATH_OPTIONS, ConvertOptions

    more = given.pop("engine_options")
    for name in more:
        if name not in ENGINE_OPTION_NAMED:  # as Python says it of a function without **
            raise TypeError(f"convert() got an unexpected keyword argument {name!r}")
    given.update(more)
    engine_options = {}
    for name, option in ENGINE_OPTION_NAMED.items():
        value = given.pop(name, option.default)  # an added engine's, where not given: its default
        engine_options[name] = check_flag(value, name) if option.flag else option_value(option, value)
    flags = {name for name, kind in typing.get_type_hints(ConvertOptions).items() if kind is bool}
    options: dict[str, Any] = {}
    for name, value in given.items():
        if name == "from_paths":
            options[name] = check_paths(value, name)
        elif name == "output_dir":
            options[name] = check_path(value, name)
        elif name in PATH_OPTIONS:
            options[name] = _path(value, name)
        else:
            options[name] = check_flag(value, name) if name in flags else value
    return {**options, "engine_options": tuple(engine_options.items())}


def convert(output_dir: PathLike, *, from_paths: Union[PathLike, Sequence[PathLike]] = DEFAULTS.from_paths,
            subset: Optional[PathLike] = DEFAULTS.subset, train_dir: Optional[PathLike] = DEFAULTS.train_dir,
            validation_dir: Optional[PathLike] = DEFAULTS.validation_dir,
            train_tar: Optional[PathLike] = DEFAULTS.train_tar,
            validation_tar: Optional[PathLike] = DEFAULTS.validation_tar,
            bounding_box_file: Optional[PathLike] = DEFAULTS.bounding_box_file,
            bbox_tar: Optional[PathLike] = DEFAULTS.bbox_tar, train_shards: int = DEFAULTS.train_shards,
            validation_shards: int = DEFAULTS.validation_shards, layout_threads: int = DEFAULTS.layout_threads,
            workers: int = DEFAULTS.workers, labels_file: Optional[PathLike] = DEFAULTS.labels_file,
            metadata_file: Optional[PathLike] = DEFAULTS.metadata_file,
            validation_labels_file: Optional[PathLike] = DEFAULTS.validation_labels_file,
            index_dir: Optional[PathLike] = DEFAULTS.index_dir, on_error: str = DEFAULTS.on_error,
            overwrite: bool = DEFAULTS.overwrite, verify_inputs: bool = DEFAULTS.verify_inputs,
            classes_from_folders: bool = DEFAULTS.classes_from_folders, runner: str = DEFAULTS.runner,
            beam_options: str = ENGINE_DEFAULTS["beam_options"], spark_master: str = ENGINE_DEFAULTS["spark_master"],
            spark_conf: Union[str, Sequence[str]] = ENGINE_DEFAULTS["spark_conf"],
            shared_filesystem: bool = ENGINE_DEFAULTS["shared_filesystem"], resize: Optional[str] = DEFAULTS.resize,
            quality: Optional[int] = DEFAULTS.quality, resize_filter: Optional[str] = DEFAULTS.resize_filter,
            resize_larger_only: bool = DEFAULTS.resize_larger_only, exif_transpose: bool = DEFAULTS.exif_transpose,
            real_labels: Optional[PathLike] = DEFAULTS.real_labels, **engine_options: Any) -> ConvertResult:
    """`imagenet-build convert`: any copy of ImageNet into slim's shards, DALI indexes and manifest.json in
    `output_dir`. The options are convert's, by name, with request.ConvertOptions' defaults and the engines' own
    (each engine declares its options; `engine_options` takes those of an engine added beyond the ones named here)
    (docs/api.md, docs/convert.md), e.g. `convert("out", from_paths=["ILSVRC2012_img_train.tar",
    "ILSVRC2012_img_val.tar"], train_shards=1024)`. Returns convert's --json document."""
    given = _convert_options(dict(locals()))  # every parameter, by the name ConvertOptions gives it
    with _tool_errors():
        from imagenet_build.request import ConvertOptions, convert_request
        from imagenet_build.writer.convert_run import convert as run

        return run(convert_request(ConvertOptions(**given)))


def verify(folder: PathLike, index_dir: Optional[PathLike] = None, quick: bool = False, deep: bool = False,
           expect_imagenet: bool = False, workers: int = 0) -> VerifyResult:
    """`imagenet-build verify`: prove the shards in `folder` and their DALI indexes sound. A problem found in the
    build is in the result (`ok` False), not raised; what stops the check (no such folder, --quick with --deep,
    a run writing the folder) raises."""
    with _tool_errors():
        from imagenet_build.verify.verify_run import verify as run

        return run(check_path(folder, "folder"), index_dir=_path(index_dir, "index_dir"),
                   quick=check_flag(quick, "quick"), deep=check_flag(deep, "deep"),
                   expect_imagenet=check_flag(expect_imagenet, "expect_imagenet"), workers=workers)


def index(inputs: Union[PathLike, Sequence[PathLike]], index_dir: Optional[PathLike] = None,
          workers: int = 0) -> IndexResult:
    """`imagenet-build index`: a DALI index for each TFRecord file in `inputs` (files or folders). A file whose
    framing is broken is in the result's `refused` (`ok` False), with no index written."""
    with _tool_errors():
        from imagenet_build.indexing.index_run import index_shards

        return index_shards(check_paths(inputs, "inputs"), index_dir=_path(index_dir, "index_dir"), workers=workers)


def report(folder: PathLike, output: Optional[PathLike] = None, per_class: int = PER_CLASS,
           classes: Union[int, str, None] = None, verify: bool = False, workers: int = 0) -> ReportResult:
    """`imagenet-build report`: the HTML page picturing the build(s) in `folder`, written to `output`
    (default: FOLDER/report.html). `classes`: how many classes get a contact sheet, or "all"; `verify`:
    run verify now (report --verify). Needs the `report` extra. The problems the page lists are in the
    result (`ok` False)."""
    with _tool_errors():
        from imagenet_build.report.report_run import report as run

        return run(check_path(folder, "folder"), _path(output, "output"), per_class=per_class, classes=classes,
                   run_verify=check_flag(verify, "verify"), workers=workers)
