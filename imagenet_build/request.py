"""convert's request: the command line's options validated once, in one place, into one frozen value.

parse (cli) -> request (here) -> plan -> execute -> commit: every later stage takes the request, never
the options. A mistake in the options is refused here in one line, before anything is read or
written: options that do not go together, a choice out of its list, a shard count slim's layout
cannot take, an output inside an input. The per-split options (--train-dir, --train-tar, ...) become
a copy like one --from finds, so a build has one input path. The options' defaults and choices are
stated once, here; the command line reads them from here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Optional, Sequence, Tuple, cast, get_args

from imagenet_build.engines import ENGINE_NAMES, ENGINES, Engine, make_engine
from imagenet_build.infra.errors import BuildError, UsageError, check_count
from imagenet_build.infra.processes import pool_size

if TYPE_CHECKING:  # the command line imports this module for the defaults: the rest is imported when a request is made
    from imagenet_build.encode.resize import ResizeOptions
    from imagenet_build.format.destination import Destination
    from imagenet_build.sources.copies import Copy

OnError = Literal["fail", "skip"]  # fail: stop at the first bad input; skip: leave it out, listed
ON_ERROR: Tuple[OnError, ...] = get_args(OnError)
RUNNERS: Tuple[str, ...] = ENGINE_NAMES  # --runner: the registered engines, local first
RUNNER_HELP = "; ".join(f"{name}: {ENGINES[name].help}" for name in RUNNERS)
QUALITY = (1, 100)  # a JPEG quality, as Pillow takes it: --quality, write_arrays' quality
RESIZE_FILTERS = ("catmull-rom", "lanczos3")  # --resize-filter: encode.resample.FILTERS' keys, the default first
_PER_SPLIT = ("train_dir", "validation_dir", "train_tar", "validation_tar")


@dataclass(frozen=True)
class ConvertOptions:
    """convert's options as given: the one home of their defaults (the command line shows these)."""

    output_dir: str
    from_paths: Tuple[str, ...] = ()  # --from: any copy of ImageNet, recognised by sources.find_copy
    subset: Optional[str] = None  # a file of image names, or a shipped list (imagenet-1pct, imagenet-10pct)
    train_dir: Optional[str] = None
    validation_dir: Optional[str] = None
    train_tar: Optional[str] = None
    validation_tar: Optional[str] = None
    bounding_box_file: Optional[str] = None
    bbox_tar: Optional[str] = None
    train_shards: int = 1024
    validation_shards: int = 128
    layout_threads: int = 8
    workers: int = 0  # 0: one per core
    labels_file: Optional[str] = None
    metadata_file: Optional[str] = None
    validation_labels_file: Optional[str] = None
    index_dir: Optional[str] = None
    on_error: str = ON_ERROR[0]
    overwrite: bool = False
    verify_inputs: bool = False  # resume: re-read the inputs of every kept shard and compare
    classes_from_folders: bool = False
    runner: str = RUNNERS[0]
    # the engines' options given, (name, value) (engines.ENGINE_OPTIONS: each engine declares its own, and their
    # defaults; --beam-options, --spark-master, --spark-conf, --shared-filesystem, ...)
    engine_options: Tuple[Tuple[str, Any], ...] = ()
    resize: Optional[str] = None  # shorter:N | longer:N | shorter:N1,N2,...: one resized build per size
    quality: Optional[int] = None  # of resized images; None: encode.resize.DEFAULT_QUALITY
    resize_filter: Optional[str] = None  # of resized images; None: RESIZE_FILTERS[0] (Catmull-Rom)
    resize_larger_only: bool = True  # False: --resize-all
    exif_transpose: bool = False
    real_labels: Optional[str] = None  # real.json: each validation record also carries its ReaL labels


DEFAULTS = ConvertOptions(output_dir="")
# the options that name a file or folder (the Python API takes each as a str or pathlib.Path; --subset's shipped
# lists by their names too); from_paths one path or several
PATH_OPTIONS = ("output_dir", "from_paths", "subset", "train_dir", "validation_dir", "train_tar", "validation_tar",
                "bounding_box_file", "bbox_tar", "labels_file", "metadata_file", "validation_labels_file", "index_dir",
                "real_labels")


@dataclass(frozen=True)
class ConvertRequest:
    """One convert, validated: what to read, how to lay it out, where to write it."""

    copy: Copy  # what to read: the copy --from names, or the one the per-split options make up
    from_paths: Tuple[str, ...]  # --from as given; empty when the per-split options name the copy
    dest: Destination  # the output folder and the index folder (its index_given: --index-dir was given)
    train_shards: int
    validation_shards: int
    layout_threads: int
    labels_file: Optional[str]  # None: the shipped ILSVRC2012 synsets
    metadata_file: Optional[str]  # None: the shipped texts
    validation_labels_file: str
    classes_from: Optional[str]  # --classes-from-folders: the folder whose sub-folders are the classes
    bounding_box_file: Optional[str]
    bbox_tar: Optional[str]
    subset: Optional[str]
    on_error: OnError
    engine: Engine  # what runs the shard tasks (--runner and its options)
    workers: int  # processes, at least 1
    overwrite: bool
    verify_inputs: bool
    resize: Optional[ResizeOptions]  # None: the full-size build
    real_labels: Optional[str] = None  # --real-labels: real.json

    def shards(self, split: str) -> int:
        """--train-shards or --validation-shards."""
        return self.train_shards if split == "train" else self.validation_shards


def _check_real_labels(options: ConvertOptions, copy: Copy) -> None:
    """--real-labels relabels ILSVRC2012's validation images: a build without them, or an evaluation set's
    own images (whatever their files are called), is refused before anything is read."""
    from imagenet_build.sources.copies import copy_kind_named

    if not options.real_labels:
        return
    kind = copy_kind_named(copy.kind)
    if kind is not None and kind.evaluation:
        raise UsageError(f"--real-labels labels ILSVRC2012's validation images, and {copy.description} holds "
                         "images of its own: ReaL has no labels for them")
    if "validation" not in copy.splits:
        raise UsageError(f"--real-labels labels ILSVRC2012's validation images, and this build has no validation "
                         f"split ({copy.description}): give the validation images too")


def _note_unused_validation_labels(options: ConvertOptions, copy: Copy) -> None:
    """--validation-labels-file labels ILSVRC2012's validation images by number: an evaluation set is labelled by
    its class folders, and a note says the file given was not used."""
    from imagenet_build.sources.copies import copy_kind_named

    kind = copy_kind_named(copy.kind)
    if options.validation_labels_file and kind is not None and kind.evaluation:
        copy.notes.append(f"--validation-labels-file {options.validation_labels_file} not used: {copy.description} "
                          "is labelled by its class folders (the file labels ILSVRC2012's validation images)")


def convert_request(options: ConvertOptions) -> ConvertRequest:
    """The options checked, in the order a user meets them, and the copy they name resolved."""
    from imagenet_build.catalog.classes import DEFAULT_VALIDATION_LABELS_FILE
    from imagenet_build.format.destination import destination
    from imagenet_build.format.output_guard import check_build_folders

    _refuse_conflicts(options)
    _check_counts(options)
    on_error = cast(OnError, _choice(options.on_error, ON_ERROR, "--on-error"))
    workers = pool_size(options.workers)
    engine = _engine(options, workers)
    resize = _resize_options(options)
    dest = destination(options.output_dir, options.index_dir)
    refuse_output_among_inputs(options, dest)  # before the scan, which would take the output for an input
    check_build_folders(dest.output, dest.index, dest.index_given)  # never into another build
    copy = _resolve_copy(options)
    options = _with_sample_files(options, copy)
    _check_shard_counts(options, copy)
    _check_real_labels(options, copy)
    _note_unused_validation_labels(options, copy)
    return ConvertRequest(
        copy=copy,
        from_paths=tuple(map(str, options.from_paths)),
        dest=dest,
        train_shards=options.train_shards,
        validation_shards=options.validation_shards,
        layout_threads=options.layout_threads,
        labels_file=options.labels_file,
        metadata_file=options.metadata_file,
        validation_labels_file=options.validation_labels_file or str(DEFAULT_VALIDATION_LABELS_FILE),
        classes_from=(options.train_dir or options.validation_dir) if options.classes_from_folders else None,
        bounding_box_file=options.bounding_box_file,
        bbox_tar=options.bbox_tar,
        subset=options.subset,
        on_error=on_error,
        engine=engine,
        workers=workers,
        overwrite=options.overwrite,
        verify_inputs=options.verify_inputs,
        resize=resize,
        real_labels=options.real_labels,
    )


def _option(name: str) -> str:
    """train_dir -> --train-dir."""
    return "--" + name.replace("_", "-")


def _refuse_conflicts(options: ConvertOptions) -> None:
    """Options that exclude each other, and a request with nothing to convert."""
    for a, b in (("train_dir", "train_tar"), ("validation_dir", "validation_tar"), ("bounding_box_file", "bbox_tar")):
        if getattr(options, a) and getattr(options, b):
            raise UsageError(f"give {_option(a)} or {_option(b)}, not both")
    explicit = [name for name in _PER_SPLIT if getattr(options, name)]
    if options.from_paths and explicit:
        raise UsageError(f"give --from or {_option(explicit[0])}, not both")
    if not (options.from_paths or explicit):
        raise UsageError("nothing to convert: give --from PATH (any copy of ImageNet), or --train-dir/--train-tar "
                         "and/or --validation-dir/--validation-tar")
    if options.classes_from_folders and (options.labels_file or options.train_tar or options.validation_tar):
        raise UsageError("--classes-from-folders takes its classes from --train-dir (or --validation-dir): "
                         "not with --labels-file or the ImageNet archives")
    if options.classes_from_folders and options.from_paths:
        raise UsageError("--classes-from-folders takes its classes from --train-dir (or --validation-dir): "
                         "not with --from")


def _check_counts(options: ConvertOptions) -> None:
    """The counts, as the command line's parser checks them (the Python API's callers pass them unparsed)."""
    for name, least in (("train_shards", 1), ("validation_shards", 1), ("layout_threads", 1), ("workers", 0)):
        check_count(getattr(options, name), _option(name), least)


def _engine(options: ConvertOptions, workers: int) -> Engine:
    """The engine --runner names, its options checked, and what it needs there (a package, Java), before anything
    is read; a local path its workers may not reach is refused (engines/engine.py, Engine.refuse_unreachable)."""
    runner = _choice(options.runner, RUNNERS, "--runner")
    engine = make_engine(runner, workers, dict(options.engine_options))
    engine.check()
    paths = {"--output-dir": [options.output_dir], "--index-dir": [options.index_dir or ""],
             "--from": list(map(str, options.from_paths))}
    paths.update({_option(name): [str(getattr(options, name))] for name in _PER_SPLIT if getattr(options, name)})
    engine.refuse_unreachable(paths)
    return engine


def _choice(value: str, choices: Sequence[str], option: str) -> str:
    if value not in choices:
        raise UsageError(f"{option} must be {' or '.join(choices)}, not {value!r}")
    return value


def is_quality(value: object) -> bool:
    """A JPEG quality Pillow takes: a whole number in QUALITY."""
    return isinstance(value, int) and not isinstance(value, bool) and QUALITY[0] <= value <= QUALITY[1]


def _resize_options(options: ConvertOptions) -> ResizeOptions | None:
    """The resize options, or None for a full-size build; UsageError for options without --resize."""
    from imagenet_build.encode.resize import DEFAULT_QUALITY, ResizeOptions, parse_targets

    if options.resize is None:  # --resize "" is a mistake, not a full-size build
        given = [name for name, value in (("--quality", options.quality is not None),
                                          ("--resize-filter", options.resize_filter is not None),
                                          ("--resize-all", not options.resize_larger_only),
                                          ("--exif-transpose", options.exif_transpose)) if value]
        if given:
            raise UsageError(f"{given[0]} goes with --resize (e.g. --resize shorter:256)")
        return None
    quality = DEFAULT_QUALITY if options.quality is None else options.quality
    if not is_quality(quality):
        raise UsageError(f"--quality must be {QUALITY[0]}..{QUALITY[1]}, not {quality}")
    kernel = _choice(options.resize_filter or RESIZE_FILTERS[0], RESIZE_FILTERS, "--resize-filter")
    return ResizeOptions(parse_targets(options.resize), quality, options.resize_larger_only, options.exif_transpose,
                         kernel)


def _resolve_copy(options: ConvertOptions) -> Copy:
    """The copy to read: the one --from's paths make up, or the one of the per-split options."""
    if options.from_paths:
        from imagenet_build.sources.copies import find_copy

        return find_copy(options.from_paths)
    from imagenet_build.sources.explicit import explicit_copy

    return explicit_copy(options.train_dir, options.validation_dir, options.train_tar, options.validation_tar,
                         options.classes_from_folders)


def _with_sample_files(options: ConvertOptions, copy: Copy) -> ConvertOptions:
    """A sample `imagenet-build sample` wrote is taken as it is: its own labels files, and its boxes where the copy
    carries none, for each of those options not given (sources/samples.py: the note beside it names them)."""
    from dataclasses import replace

    from imagenet_build.sources.copies import copy_kind_named
    from imagenet_build.sources.samples import SAMPLE_NOTE, sample_files

    files = sample_files(options.from_paths)
    kind = copy_kind_named(copy.kind)
    if kind is not None and kind.evaluation:  # labelled by class folder, no train split: neither file is for it
        files.pop("validation_labels_file", None)
        files.pop("bounding_box_file", None)
    if copy.carries_boxes:
        files.pop("bounding_box_file", None)
    taken = {key: path for key, path in files.items() if getattr(options, key) is None}
    if not taken:
        return options
    copy.notes.append(f"the sample's own {', '.join(sorted(Path(p).name for p in taken.values()))} "
                      f"({SAMPLE_NOTE})")
    return replace(options, labels_file=taken.get("labels_file", options.labels_file),
                   validation_labels_file=taken.get("validation_labels_file", options.validation_labels_file),
                   bounding_box_file=taken.get("bounding_box_file", options.bounding_box_file))


def _check_shard_counts(options: ConvertOptions, copy: Copy) -> None:
    """Shard counts that slim's layout cannot take are a usage error now, not after the scan."""
    from imagenet_build.plan import shard_ranges

    for split, shards in (("train", options.train_shards), ("validation", options.validation_shards)):
        if split in copy.splits:
            shard_ranges(0, shards, options.layout_threads)


def refuse_output_among_inputs(options: ConvertOptions, dest: Destination) -> None:
    """An output inside an input folder would be read back as input by the next run: refuse it now. The folder
    of a copy that is a folder (Hugging Face's data/) is an input folder however its files are given."""

    from imagenet_build.infra import storage
    from imagenet_build.sources.copies import copy_folders  # the sources package registers every copy

    if dest.remote:
        return
    for option, folder in (("--output-dir", dest.output), ("--index-dir", dest.index)):
        if os.path.exists(folder) and not os.path.isdir(folder):
            raise BuildError(f"{folder}: exists and is not a folder; choose another {option}")
    inputs = [(_option(name), getattr(options, name))
              for name in ("train_dir", "validation_dir") if getattr(options, name)]
    inputs += [("--from", path) for path in options.from_paths if not storage.is_url(path) and os.path.isdir(path)]
    inputs += [(f"--from {given}'s folder", folder) for given, folder in copy_folders(options.from_paths)]
    for option, folder in (("--output-dir", dest.output), ("--index-dir", dest.index)):
        if option == "--index-dir" and not dest.index_given:
            continue
        where = Path(folder).resolve()
        for input_option, input_folder in inputs:
            root = Path(input_folder).resolve()
            if where == root or root in where.parents:
                raise UsageError(f"{option} {folder} is inside {input_option} {input_folder}: "
                                 f"the next run would read the output as input; choose a {option} outside it")
