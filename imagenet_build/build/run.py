"""convert: inputs -> plan -> one ShardTask per shard on the workers -> manifest and summary.

The run loop of a build: take the output folder's lock (output), list the inputs
(sources), plan the shards (plan), check the folder (output), keep what a previous
run vouches for (resume), write the rest (writer, on worker processes or Apache Beam), and
record each finished shard in the manifest, written complete last.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Callable, Optional, TypeVar, cast

from imagenet_build import plan as plan_mod
from imagenet_build import sources
from imagenet_build.build import manifest as manifest_mod
from imagenet_build.build.folder import (
    Destination,
    check_output_dir,
    destination,
    ignored_entry,
    locked,
    refuse_output_among_inputs,
    remove_unrecorded,
)
from imagenet_build.build.resume import SHARD_INPUTS, read_previous, shards_to_keep
from imagenet_build.build.writer import INPUT_STATE, ResizedShardTask, ShardTask, write_resized_shard, write_shard
from imagenet_build.catalog import classes as catalog_mod
from imagenet_build.catalog.boxes import (
    BOX_BYTES,
    boxes_to_csv_lines,
    parse_box_lines,
    read_box_csv,
)
from imagenet_build.encode.resize import DEFAULT_QUALITY, RESIZED_FOLDER, ResizeOptions, parse_targets
from imagenet_build.format.naming import BEAM_RESULTS, LABELS_NAME, MANIFEST_NAME
from imagenet_build.infra import storage
from imagenet_build.infra.errors import BuildError, PathLike, Stopped, UsageError, one_line
from imagenet_build.infra.workers import Workers, progress_bar
from imagenet_build.model import SplitInput
from imagenet_build.sources import spool

A = TypeVar("A")
B = TypeVar("B")
MANIFEST_EVERY = 5.0  # seconds between rewrites of the in-progress manifest


@dataclass
class ConvertOptions:
    output_dir: str
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
    on_error: str = "fail"
    overwrite: bool = False
    classes_from_folders: bool = False
    from_paths: tuple[str, ...] = ()  # --from: any copy of ImageNet, recognised by sources.find_copy
    subset: Optional[str] = None  # --subset: a file of image names, or a shipped list (imagenet-1pct, imagenet-10pct)
    verify_inputs: bool = False  # resume: re-read the inputs of every kept shard and compare
    runner: str = "local"  # or "beam": one Beam task per shard
    beam_options: str = ""
    resize: Optional[str] = None  # --resize shorter:N | longer:N | shorter:N1,N2,...: one resized build per size
    quality: Optional[int] = None  # --quality of resized images [default 90]
    resize_larger_only: bool = True  # False: --resize-all
    exif_transpose: bool = False


def _layout_options(opts: ConvertOptions, index_dir_label: str, splits: list[str]) -> dict[str, Any]:
    """The options that fix which files a build has; a rerun must repeat them to resume."""
    return {
        "splits": sorted(splits),
        "train_shards": opts.train_shards if "train" in splits else None,
        "validation_shards": opts.validation_shards if "validation" in splits else None,
        "layout_threads": opts.layout_threads,
        "index_dir": index_dir_label,
        "classes_from_folders": opts.classes_from_folders,
    }


def _scan_copy(copy: sources.Copy, opts: ConvertOptions, cat: catalog_mod.Catalog,
               val_labels: Callable[[], list[str]], val_labels_file: str, pool: Workers) -> list[SplitInput]:
    """Both splits of a --from copy, after the work it does for both at once (copy.prepare)."""
    copy.prepare(pool)
    split_inputs = []
    if "train" in copy.splits:
        split_inputs.append(copy.scan_train(cat, opts.on_error, pool))
    if "validation" in copy.splits:
        split_inputs.append(copy.scan_validation(cat, opts.on_error, pool, val_labels, val_labels_file))
    return split_inputs


def _scan_inputs(
    opts: ConvertOptions, cat: catalog_mod.Catalog, val_labels_file: str, pool: Workers, copy: sources.Copy | None
) -> list[SplitInput]:
    def val_labels() -> list[str]:
        return catalog_mod.read_validation_labels(val_labels_file)

    if copy is not None:
        return _scan_copy(copy, opts, cat, val_labels, val_labels_file, pool)
    split_inputs = []
    if opts.classes_from_folders:  # any dataset of class folders: both splits in folders
        for split, root in (("train", opts.train_dir), ("validation", opts.validation_dir)):
            if root:
                split_inputs.append(sources.scan_class_folders(split, root, cat, opts.on_error, any_image=True))
        return split_inputs
    if opts.train_dir:
        split_inputs.append(sources.scan_class_folders("train", opts.train_dir, cat, opts.on_error))
    elif opts.train_tar:
        split_inputs.append(sources.scan_train_tar(opts.train_tar, cat, opts.on_error, pool))
    if opts.validation_dir:
        split_inputs.append(
            sources.scan_validation(opts.validation_dir, cat, val_labels, val_labels_file, opts.on_error)
        )
    elif opts.validation_tar:
        split_inputs.append(
            sources.scan_validation_tar(opts.validation_tar, cat, val_labels, val_labels_file, opts.on_error)
        )
    return split_inputs


def _found(copy: sources.Copy, split_inputs: list[SplitInput], boxes: dict[str, bytes]) -> str:
    """"<copy>: 1,281,167 train, 50,000 validation, 544,546 annotated": what --from found."""
    counts = [f"{len(s):,} {s.split}" for s in split_inputs]
    if boxes:
        counts.append(f"{len(boxes):,} annotated")
    return f"{copy.description}: {', '.join(counts)}"


def _apply_subset(
    opts: ConvertOptions, listed: tuple[str, frozenset[str]], split_inputs: list[SplitInput]
) -> tuple[str, list[SplitInput]]:
    """Keep only the images --subset names (original file names); labels keep their values.

    Validation names (ILSVRC2012_val_*) select from the validation split, all others from
    train; a split the list names no image of is kept whole. A listed name the source lacks
    is an error (listed as left out with --on-error skip).
    """
    label, names = listed
    wanted: dict[str, frozenset[str] | set[str]] = {
        "validation": {n for n in names if sources.VALIDATION_NAME.match(n)}
    }
    wanted["train"] = names - wanted["validation"]
    kept = []
    for split_input in split_inputs:
        chosen = wanted.get(split_input.split) or set()
        if not chosen:
            split_input.notes.append(f"--subset {label} names no {split_input.split} image: all of them kept")
            kept.append(split_input)
            continue
        only = split_input.only(chosen)
        missing = chosen - {relpath.rsplit("/", 1)[-1] for relpath in only.relpaths}
        if missing:
            first = sorted(missing)[0]
            if opts.on_error == "fail":
                raise BuildError(f"--subset {label}: {len(missing):,} listed image(s) are not in the "
                                 f"{split_input.split} source, e.g. {first}; --on-error skip builds without them")
            only.left_out.extend((name, f"listed in --subset {label}, not in the source") for name in sorted(missing))
        kept.append(only)
    if opts.subset in catalog_mod.SUBSETS:
        return label, kept
    return f"{storage.basename(label)} sha256:{storage.sha256(label)}", kept


def _load_catalog(opts: ConvertOptions) -> catalog_mod.Catalog:
    if not opts.classes_from_folders:
        return catalog_mod.load_catalog(opts.labels_file, opts.metadata_file)
    if opts.labels_file or opts.train_tar or opts.validation_tar:
        raise UsageError("--classes-from-folders takes its classes from --train-dir (or --validation-dir): "
                         "not with --labels-file or the ImageNet archives")
    root = opts.train_dir or opts.validation_dir
    assert root is not None  # convert() refused a build with no inputs
    return catalog_mod.catalog_from_folders(root, opts.metadata_file)


def _read_boxes(opts: ConvertOptions, cat: catalog_mod.Catalog, copy: sources.Copy | None) -> dict[str, bytes]:
    """Boxes from slim's CSV, or straight from the XML annotations through the same CSV lines."""
    if copy is not None and copy.carries_boxes and not (opts.bounding_box_file or opts.bbox_tar):
        return copy.boxes(cat)
    if opts.bounding_box_file:
        return read_box_csv(opts.bounding_box_file)
    if opts.bbox_tar:
        lines, _, _ = boxes_to_csv_lines(opts.bbox_tar, cat.synsets)
        return parse_box_lines(lines, opts.bbox_tar)
    return {}


def convert(opts: ConvertOptions) -> dict[str, Any]:
    """inputs -> shards + indexes + manifest. Returns the summary dict."""
    started = time.monotonic()
    for a, b in (("train_dir", "train_tar"), ("validation_dir", "validation_tar"),
                 ("bounding_box_file", "bbox_tar")):
        if getattr(opts, a) and getattr(opts, b):
            raise UsageError(f"give --{a.replace('_', '-')} or --{b.replace('_', '-')}, not both")
    explicit = [name for name in ("train_dir", "validation_dir", "train_tar", "validation_tar") if getattr(opts, name)]
    if opts.from_paths and explicit:
        raise UsageError(f"give --from or --{explicit[0].replace('_', '-')}, not both")
    if not (opts.from_paths or explicit):
        raise UsageError("nothing to convert: give --from PATH (any copy of ImageNet), or --train-dir/--train-tar "
                         "and/or --validation-dir/--validation-tar")
    if opts.on_error not in ("fail", "skip"):
        raise UsageError(f"--on-error must be fail or skip, not {opts.on_error!r}")
    workers = opts.workers or os.cpu_count() or 1
    if opts.runner not in ("local", "beam"):
        raise UsageError(f"--runner must be local or beam, not {opts.runner!r}")
    resize = _resize_options(opts)
    dest = destination(opts.output_dir, opts.index_dir)
    refuse_output_among_inputs(opts, dest)  # before the scan, which would take the output for an input
    if resize is not None:
        _check_resize_root(dest, opts.index_dir)
    return _convert(opts, workers, dest, started, resize)


def _resize_options(opts: ConvertOptions) -> ResizeOptions | None:
    """The resize options, or None for a full-size build; UsageError for options without --resize."""
    if opts.resize is None:  # --resize "" is a mistake, not a full-size build
        given = [name for name, value in (("--quality", opts.quality is not None),
                                          ("--resize-all", not opts.resize_larger_only),
                                          ("--exif-transpose", opts.exif_transpose)) if value]
        if given:
            raise UsageError(f"{given[0]} goes with --resize (e.g. --resize shorter:256)")
        return None
    quality = DEFAULT_QUALITY if opts.quality is None else opts.quality
    if not 1 <= quality <= 100:
        raise UsageError(f"--quality must be 1..100, not {quality}")
    return ResizeOptions(parse_targets(opts.resize), quality, opts.resize_larger_only, opts.exif_transpose)


class _Build:
    """One build being written: where it goes, its layout options, the shards it holds, its manifest."""

    def __init__(self, dest: Destination, options: dict[str, Any], resize: ResizeOptions | None) -> None:
        self.dest, self.options, self.resize = dest, options, resize  # resize: one target, or None
        self.previous: manifest_mod.Manifest | None = None
        self.done: dict[str, dict[str, Any]] = {}
        self.header: dict[str, Any] = {}
        self.written: list[str] = []


def _builds(
    dest: Destination, options: dict[str, Any], resize: ResizeOptions | None, index_dir: str | None
) -> list[_Build]:
    """The full-size build in OUTPUT, or one resized build per target in OUTPUT/<target>/ (each complete:
    its own indexes, manifest, resume; the same files as a run for that target alone)."""
    if resize is None:
        return [_Build(dest, options, None)]
    builds = []
    for target, sub in _strict_zip(resize.targets, _destinations(dest, resize, index_dir)):
        one = resize.only([target])
        sub_options = dict(options, index_dir=sub.label_for_manifest(), resize=one.recorded(target))
        builds.append(_Build(sub, sub_options, one))
    return builds


def _destinations(dest: Destination, resize: ResizeOptions | None, index_dir: str | None) -> list[Destination]:
    """Where each build goes: OUTPUT, or OUTPUT/<target>/ per resized target."""
    if resize is None:
        return [dest]
    return [destination(storage.join(dest.output, target.folder),
                        storage.join(index_dir, target.folder) if index_dir else None) for target in resize.targets]


def _check_resize_root(dest: Destination, index_dir: str | None) -> None:
    """A resized build's OUTPUT holds resized builds only (a full-size build's folder would take them for strangers)."""
    for folder in [dest.output] + ([dest.index] if index_dir else []):
        for entry, is_dir in sorted(storage.listdir(folder).items()):
            if ignored_entry(entry, is_dir):
                continue
            if not (is_dir and RESIZED_FOLDER.match(entry)):
                raise BuildError(f"{folder}: holds {entry}, which is not a resized build (folders like shorter-256); "
                                 "choose an empty or new folder for --resize builds")


def _convert(
    opts: ConvertOptions, workers: int, dest: Destination, started: float, resize: ResizeOptions | None
) -> dict[str, Any]:
    """With every build's folders held from the start: a second run is refused before it scans or
    decompresses anything (a .tar.gz copy's spool is ~140 GB), not after. The workers end before a
    copy's spool is removed (one still writing into it would leave part of it behind)."""
    copy = sources.find_copy(opts.from_paths) if opts.from_paths else None
    _check_layout(opts, copy)
    with contextlib.ExitStack() as held:
        for build_dest in _destinations(dest, resize, opts.index_dir):
            held.enter_context(locked(build_dest))
        if not dest.remote:
            spool.remove_stale(dest.output)  # a killed run's, whatever this run reads
        if copy is not None:
            copy.work_dir = "" if dest.remote else dest.output
            held.callback(copy.close)  # the spool goes before the locks, which then remove a folder they made
        with Workers(workers) as pool:
            return _convert_copy(opts, pool, dest, started, resize, copy)


def _convert_copy(opts: ConvertOptions, pool: Workers, dest: Destination, started: float,
                  resize: ResizeOptions | None, copy: sources.Copy | None) -> dict[str, Any]:
    cat = _load_catalog(opts)
    listed = catalog_mod.read_subset(opts.subset) if opts.subset else None  # a bad list: before the long scan
    boxes = _read_boxes(opts, cat, copy)
    val_labels_file = opts.validation_labels_file or str(catalog_mod.DEFAULT_VALIDATION_LABELS_FILE)
    split_inputs = _scan_inputs(opts, cat, val_labels_file, pool, copy)
    subset = None
    if listed:
        subset, split_inputs = _apply_subset(opts, listed, split_inputs)
    found = _found(copy, split_inputs, boxes) if copy is not None else None
    shard_counts = {"train": opts.train_shards, "validation": opts.validation_shards}
    plans = [
        plan_mod.SplitPlan(si, cat, boxes, shard_counts[si.split], opts.layout_threads) for si in split_inputs
    ]
    options = _layout_options(opts, dest.label_for_manifest(), [p.split for p in plans])
    if subset:
        options["subset"] = subset  # only when given: manifests of builds without one stay as they were
    builds = _builds(dest, options, resize, opts.index_dir)
    summary = _write(opts, pool, builds, resize, started, cat, split_inputs, plans, val_labels_file, boxes, copy)
    if found:
        summary["found"] = found
    return summary


def _check_layout(opts: ConvertOptions, copy: sources.Copy | None) -> None:
    """Shard counts that slim's layout cannot take are a usage error now, not after the scan."""
    if copy is not None:
        splits = list(copy.splits)
    else:
        splits = [split for split in ("train", "validation")
                  if getattr(opts, f"{split}_dir") or getattr(opts, f"{split}_tar")]
    for split in splits:
        plan_mod.shard_ranges(0, getattr(opts, f"{split}_shards"), opts.layout_threads)


def _write(
    opts: ConvertOptions,
    pool: Workers,
    builds: list[_Build],
    resize: ResizeOptions | None,
    started: float,
    cat: catalog_mod.Catalog,
    split_inputs: list[SplitInput],
    plans: list[plan_mod.SplitPlan],
    val_labels_file: str,
    boxes: dict[str, bytes],
    copy: sources.Copy | None,
) -> dict[str, Any]:
    """Everything that writes, under the outputs' locks: each image read once, written to every build."""
    _prepare(opts, pool, builds, cat, plans, _describe_inputs(opts, split_inputs, val_labels_file, copy), copy)
    last_write = [time.monotonic()]

    def save(complete: bool, ended: dict[str, str] | None = None) -> None:
        for build in builds:
            manifest = _manifest(build.header, plans, build.done, complete)
            manifest_mod.write_manifest(build.dest.output, cast(manifest_mod.Manifest, dict(manifest, **ended or {})))
        last_write[0] = time.monotonic()

    sizes = {name: p.size(k) for p in plans for k, name in enumerate(p.names)}
    total_images = sum(sizes.values())
    kept_images = sum(size for name, size in sizes.items() if all(name in b.done for b in builds))
    bar = progress_bar(total_images, kept_images, "convert", "img")
    by_dest = {build.dest: build for build in builds}
    written = []

    def finished(task: Any, result: Any) -> None:
        dests, entries = ([task.dest], [result]) if resize is None else (task.dests, result)
        for dest, entry in _strict_zip(dests, entries):
            by_dest[dest].done[entry["name"]] = entry
            by_dest[dest].written.append(entry["name"])
        written.append(task.spec.name)
        bar.update(len(task.spec.entries))
        # at once after the first shard, then every few seconds: a failed last write still leaves
        # a manifest that vouches for the shards finished until then
        if len(written) == 1 or time.monotonic() - last_write[0] > MANIFEST_EVERY:
            save(False)

    todo = [(p, k) for p in plans for k, name in enumerate(p.names) if any(name not in b.done for b in builds)]
    if copy is not None:  # a .tar.gz copy planned from kept listings: decompressed only where a shard is written
        copy.make_readable(pool, {p.split for p, _ in todo})
    tasks = (_shard_task(opts, builds, resize, p, k) for p, k in todo)
    try:
        _run_tasks(opts, pool, builds, resize, tasks, finished)
        save(True)
    except BaseException as e:
        interrupted = isinstance(e, KeyboardInterrupt)
        ended = {"ended": "interrupted"} if interrupted else {"ended": "failed", "error": one_line(e)}
        _stop(pool, builds, lambda: save(False, ended))
        if interrupted:
            raise Stopped("interrupted; run the same command again to resume") from None
        raise
    finally:
        bar.close()
    seconds = time.monotonic() - started
    processed = total_images - kept_images
    summaries = [_summary(b.dest.output, plans, b.done, len(b.written), seconds, processed) for b in builds]
    if resize is None:
        summary = summaries[0]
    else:
        summary = _resized_summary(opts, resize, builds, summaries, len(todo), seconds, processed)
    if copy is not None:
        summary["notes"][:0] = copy.notes
    if boxes:
        summary["boxes"] = _box_figures(boxes, split_inputs)
    return summary


def _stop(pool: Workers, builds: list[_Build], save: Callable[[], None]) -> None:
    """A run stopped early: its workers end (the shards they were writing finished and recorded), every
    file a build holds that its manifest does not list is removed (a shard renamed into place just as
    the run stopped, a temporary file), and the manifest is written, saying how the run ended."""
    try:
        pool.close()
        for build in builds:
            remove_unrecorded(build.dest, set(build.done))
    finally:
        save()


def _shard_task(
    opts: ConvertOptions, builds: list[_Build], resize: ResizeOptions | None, p: plan_mod.SplitPlan, k: int
) -> ShardTask | ResizedShardTask:
    """The task that writes shard k of a plan to every build that lacks it."""
    spec = p.spec(k)
    if resize is None:
        return ShardTask(spec, builds[0].dest, opts.on_error)
    lacking = [b for b in builds if spec.name not in b.done]  # a shard resumes per build
    targets = []
    for build in lacking:
        assert build.resize is not None  # a resized run's builds each have their one target
        targets.append(build.resize.targets[0])
    return ResizedShardTask(spec, tuple(b.dest for b in lacking), opts.on_error, resize.only(targets))


def _run_tasks(
    opts: ConvertOptions,
    pool: Workers,
    builds: list[_Build],
    resize: ResizeOptions | None,
    tasks: Iterable[ShardTask | ResizedShardTask],
    finished: Callable[[Any, Any], None],
) -> None:
    """Each task on the workers, or on Apache Beam; finished(task, result) on this process as each ends."""
    fn = write_shard if resize is None else write_resized_shard
    if opts.runner == "beam":
        from imagenet_build.build.beam import run_on_beam

        root = builds[0].dest.output if resize is None else opts.output_dir
        results = storage.join(root, BEAM_RESULTS) if builds[0].dest.remote else None
        run_on_beam(fn, tasks, finished, opts.beam_options, results)
    else:
        pool.run(fn, tasks, finished)


def _prepare(
    opts: ConvertOptions,
    pool: Workers,
    builds: list[_Build],
    cat: catalog_mod.Catalog,
    plans: list[plan_mod.SplitPlan],
    inputs: dict[str, Any],
    copy: sources.Copy | None,
) -> None:
    """Each build's output checked, what a previous run left read, the shards it may keep, its manifest header."""
    names = {n for p in plans for n in p.names}
    for build in builds:
        build.previous = read_previous(build.dest.output, opts.overwrite, build.options)
        check_output_dir(build.dest, names, opts.overwrite)
        if opts.classes_from_folders:
            labels = "".join(f"{name}\n" for name in cat.synsets).encode()
            storage.write_bytes(storage.join(build.dest.output, LABELS_NAME), labels)
    if copy is not None:
        copy.keep_listings()  # the output is checked: a rerun may plan from what it keeps
        if opts.verify_inputs:  # every kept shard's inputs are read again
            copy.make_readable(pool, [p.split for p in plans])
    for build in builds:
        build.done = shards_to_keep(build.previous, plans, build.dest, opts.on_error, pool, opts.verify_inputs,
                                    build.resize)
        build.header = {
            "format": manifest_mod.FORMAT,
            "options": build.options,
            "inputs": inputs,
            "num_classes": cat.num_classes,
            "synsets": list(cat.synsets),  # label k is synsets[k - 1]
        }


def _resized_summary(
    opts: ConvertOptions,
    resize: ResizeOptions,
    builds: list[_Build],
    summaries: list[dict[str, Any]],
    shards_read: int,
    seconds: float,
    processed: int,
) -> dict[str, Any]:
    """The summary of a --resize run: each build's own under its folder's name."""
    by_folder = {}
    for build, summary in _strict_zip(builds, summaries):
        assert build.resize is not None  # a resized run's builds each have their one target
        by_folder[build.resize.targets[0].folder] = summary
    return {
        "ok": True,
        "output_dir": str(opts.output_dir),
        "resize": {"targets": [t.label for t in resize.targets], "quality": resize.quality,
                   "larger_only": resize.larger_only, "exif_transpose": resize.exif_transpose},
        "builds": by_folder,
        "shards_read": shards_read,
        "seconds": round(seconds, 3),
        "images_per_second": round(processed / seconds, 1) if seconds > 0 else None,
        "notes": [],
    }


def _strict_zip(first: Sequence[A], second: Sequence[B]) -> Iterator[tuple[A, B]]:
    """zip(first, second, strict=True), which Python 3.9 lacks: pairs of two sequences of one length."""
    if len(first) != len(second):
        raise ValueError(f"_strict_zip: lengths {len(first)} and {len(second)} differ")
    return zip(first, second)


def _box_figures(boxes: dict[str, bytes], split_inputs: list[SplitInput]) -> dict[str, int]:
    """How many images of the build got boxes, and how many box rows named no image of it."""
    rows = sum(len(packed) // BOX_BYTES for packed in boxes.values())
    images_with_boxes = matched_rows = 0
    for split_input in split_inputs:
        for relpath in split_input.relpaths:
            packed = boxes.get(relpath.rsplit("/", 1)[-1])
            if packed:
                images_with_boxes += 1
                matched_rows += len(packed) // BOX_BYTES
    return {"rows": rows, "images_with_boxes": images_with_boxes, "rows_naming_no_image": rows - matched_rows}


def _describe_inputs(
    opts: ConvertOptions, split_inputs: list[SplitInput], val_labels_file: str, copy: sources.Copy | None
) -> dict[str, Any]:
    def sha(path: PathLike | None) -> str | None:
        return storage.sha256(str(path)) if path else None

    described: dict[str, Any] = {
        "labels_file_sha256": sha(opts.labels_file or catalog_mod.DEFAULT_LABELS_FILE),
        "metadata_file_sha256": sha(opts.metadata_file or catalog_mod.DEFAULT_METADATA_FILE),
        "bounding_box_file_sha256": sha(opts.bounding_box_file or opts.bbox_tar),
    }
    if copy is not None:
        described["source"] = {"layout": copy.layout, "description": copy.description}
    for s in split_inputs:
        described[s.split] = {"layout": s.layout, "images": len(s)}
        if s.layout == "flat":
            described[s.split]["validation_labels_file_sha256"] = sha(val_labels_file)
    return described


def _manifest(
    header: dict[str, Any], plans: list[plan_mod.SplitPlan], done: dict[str, dict[str, Any]], complete: bool
) -> manifest_mod.Manifest:
    finished = [done[name] for p in plans for name in p.names if name in done]
    shards = [cast(manifest_mod.ShardEntry, {k: v for k, v in e.items() if k != INPUT_STATE}) for e in finished]
    inputs = dict(header["inputs"], **{SHARD_INPUTS: {e["name"]: e[INPUT_STATE] for e in finished}})
    splits: dict[str, manifest_mod.SplitFigures] = {}
    for p in plans:
        entries = [done[name] for name in p.names if name in done]
        split = manifest_mod.SplitFigures(**{
            "shards": p.num_shards,
            "shards_done": len(entries),
            "records": sum(e["records"] for e in entries),
            "bytes": sum(e["bytes"] for e in entries),
            "left_out": [{"file": f, "reason": r} for f, r in p.input.left_out],
        })
        if len(entries) == p.num_shards:  # label histogram of what the shards hold
            counts = Counter(p.input.labels)
            counts.subtract(skip["label"] for e in entries for skip in e["skipped"])
            split["label_counts"] = {str(k): v for k, v in sorted(counts.items()) if v}
        splits[p.split] = split
    return manifest_mod.Manifest(
        format=header["format"],
        options=header["options"],
        num_classes=header["num_classes"],
        synsets=header["synsets"],
        inputs=inputs,
        complete=complete,
        splits=splits,
        shards=shards,
        totals={
            "records": sum(e["records"] for e in shards),
            "bytes": sum(e["bytes"] for e in shards),
            "skipped": sum(len(e["skipped"]) for e in shards),
            "reencoded": sum(1 for e in shards for r in e["reencoded"] if r["reencoded"]),
        },
    )


def _summary(
    output_dir: str,
    plans: list[plan_mod.SplitPlan],
    done: dict[str, dict[str, Any]],
    written: int,
    seconds: float,
    images_processed: int,
) -> dict[str, Any]:
    shards = [done[name] for p in plans for name in p.names]
    summary: dict[str, Any] = {
        "ok": True,
        "output_dir": str(output_dir),
        "manifest": storage.join(output_dir, MANIFEST_NAME),
        "shards_written": written,
        "shards_kept": len(shards) - written,
        "records": sum(e["records"] for e in shards),
        "bytes": sum(e["bytes"] for e in shards),
        "seconds": round(seconds, 3),
        "images_per_second": round(images_processed / seconds, 1) if seconds > 0 else None,
        "splits": {},
        "skipped": [dict(s, split=e["split"]) for e in shards for s in e["skipped"]],
        "reencoded": [dict(r, split=e["split"]) for e in shards for r in e["reencoded"]],
        "notes": [],
    }
    for p in plans:
        s = p.input
        summary["splits"][p.split] = {
            "layout": s.layout,
            "images": len(s),
            "records": sum(done[name]["records"] for name in p.names),
            "shards": p.num_shards,
        }
        summary["notes"].extend(s.notes)
        if s.ignored:
            shown = ", ".join(s.ignored[: sources.SHOWN])
            summary["notes"].append(
                f"{p.split}: {len(s.ignored)} file(s) ignored (not <synset>/*.JPEG as slim takes them): {shown}"
            )
        if s.empty_classes:
            summary["notes"].append(
                f"{p.split}: {len(s.empty_classes)} class(es) of the labels file have no images: "
                + ", ".join(s.empty_classes[: sources.SHOWN])
            )
        summary["skipped"].extend({"file": f, "reason": r, "split": p.split} for f, r in s.left_out)
    return summary
