"""Execute the plan: one ShardSpec per task, each shard and its DALI index written atomically.

A worker is a pure function of its ShardSpec; the DALI index is computed from the
offsets while the shard is written (no second pass), and so is the sha256. Files
appear under their final names only when complete (temp name, fsync, rename).
The manifest lists finished shards as they come in and is written complete last;
a rerun keeps the shards it lists whose fingerprint and sha256 still match and
redoes the rest.
"""

import contextlib
import hashlib
import os
import re
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from imagenet_build import catalog as catalog_mod
from imagenet_build import images, sources, storage
from imagenet_build import manifest as manifest_mod
from imagenet_build import plan as plan_mod
from imagenet_build.archives import read_range
from imagenet_build.atomic import fsync_dir, temp_name
from imagenet_build.boxes import (
    BOX_BYTES,
    boxes_to_csv_lines,
    parse_box_lines,
    read_box_csv,
)
from imagenet_build.dali_index import DEFAULT_INDEX_DIR, index_text
from imagenet_build.errors import BuildError, InputError, UsageError
from imagenet_build.example import encode_example_parts
from imagenet_build.lock import LOCK_NAME, FolderLock
from imagenet_build.plan import entry_identity, stat_identity
from imagenet_build.tfrecord import frame
from imagenet_build.workers import Workers, exit_if_orphaned, progress_bar

SHARD_NAME = re.compile(r"^(train|validation)-\d{5}-of-\d{5}$")
TEMP_NAME = re.compile(r"^\..+\.\d+\.tmp$")
BEAM_RESULTS = ".beam-results"  # with --runner beam and a URL output: the tasks' figures, removed after
LABELS_NAME = "labels.txt"  # written with --classes-from-folders: the class of each label
INPUT_STATE = "input_state"  # a worker's figure for the manifest's inputs, not for its shard entry
SHARD_INPUTS = "shards"  # manifest["inputs"]["shards"]: {shard name: its inputs' state}
MANIFEST_EVERY = 5.0  # seconds between rewrites of the in-progress manifest
WRITEBACK_EVERY = 4 << 20  # bytes written between two nudges to start writeback
READ_AHEAD = 8  # input images opened and announced to the kernel ahead of their turn


@dataclass
class ConvertOptions:
    output_dir: str
    train_dir: str = None
    validation_dir: str = None
    train_tar: str = None
    validation_tar: str = None
    bounding_box_file: str = None
    bbox_tar: str = None
    train_shards: int = 1024
    validation_shards: int = 128
    layout_threads: int = 8
    workers: int = 0  # 0: one per core
    labels_file: str = None
    metadata_file: str = None
    validation_labels_file: str = None
    index_dir: str = None
    on_error: str = "fail"
    overwrite: bool = False
    classes_from_folders: bool = False
    verify_inputs: bool = False  # resume: re-read the inputs of every kept shard and compare
    runner: str = "local"  # or "beam": one Beam task per shard
    beam_options: str = ""


# ---------------------------------------------------------------- the worker


class _ShardInputs:
    """A shard's input images, read from their folder, or by byte range from their archive.

    Reads ahead: the next READ_AHEAD images are opened and announced to the kernel
    (POSIX_FADV_WILLNEED), so that with a cold cache the disk always has several
    reads in flight instead of one at a time.
    """

    def __init__(self, spec):
        self._spec = spec
        self._archive_fd = None  # an fd (pread) for a local archive, a file object for an object store
        if spec.source_is_archive:
            self._archive_fd = (storage.open_read(spec.source_root, random_access=True)
                                if storage.is_url(spec.source_root) else os.open(spec.source_root, os.O_RDONLY))
        self._opened = {}  # entry number -> fd opened ahead
        self._hinted = 0  # entries [0, _hinted) announced
        self.identities = []  # entry_identity of each input read, in order: for the shard's fingerprint

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for fd in self._opened.values():
            os.close(fd)
        if isinstance(self._archive_fd, int):
            os.close(self._archive_fd)
        elif self._archive_fd is not None:
            self._archive_fd.close()

    def _path(self, entry):
        return self._spec.path_of(entry)

    def _announce(self, upto):
        entries = self._spec.entries
        while self._hinted < min(upto, len(entries)):
            entry = entries[self._hinted]
            try:
                if isinstance(self._archive_fd, int):
                    _will_need(self._archive_fd, entry.offset, entry.size)
                elif self._archive_fd is not None:
                    pass  # an object store: each image is one ranged read
                else:
                    fd = os.open(self._path(entry), os.O_RDONLY)
                    self._opened[self._hinted] = fd
                    _will_need(fd, 0, 0)
            except OSError:
                pass  # read() reports it, in order
            self._hinted += 1

    def read(self, number):
        """(bytes, the name to show in errors) of entry `number`; its identity goes to `identities`."""
        entry = self._spec.entries[number]
        self._announce(number + 1 + READ_AHEAD)
        if self._archive_fd is not None:
            self.identities.append(entry_identity(self._spec, entry))
            where = f"{self._spec.source_root}:{entry.relpath}"
            data = read_range(self._archive_fd, entry.offset, entry.size)
            if len(data) != entry.size:
                raise InputError(where, "archive shorter than when it was indexed")
            return data, where
        path = self._path(entry)
        fd = self._opened.pop(number, None)
        if fd is None:
            self.identities.append(entry_identity(self._spec, entry))
        else:
            self.identities.append(stat_identity(os.fstat(fd)))
        try:
            with open(path if fd is None else fd, "rb") as f:
                return f.read(), path
        except FileNotFoundError:
            raise InputError(path, "file vanished since the folder was listed") from None
        except IsADirectoryError:
            raise InputError(path, "is a folder, expected an image") from None
        except OSError as e:
            raise InputError(path, e.strerror or str(e)) from None


def _will_need(fd, offset, length):
    if hasattr(os, "posix_fadvise"):
        os.posix_fadvise(fd, offset, length, os.POSIX_FADV_WILLNEED)


def _write_all(fd, parts):
    """os.writev until every byte of `parts` is written (no copy of the payload)."""
    total = sum(len(p) for p in parts)
    written = os.writev(fd, parts)
    if written < total:  # rare partial write: finish the rest plainly
        os.write(fd, b"".join(parts)[written:])


def _start_writeback(fd, offset, length):
    """Start writing a range of the shard to disk now, without waiting, so that the
    fsync at the end of the shard has little left to wait for; where the hint is
    missing the fsync simply does it all."""
    if hasattr(os, "posix_fadvise"):
        os.posix_fadvise(fd, offset, length, os.POSIX_FADV_DONTNEED)


def write_records(name, output_dir, index_dir, payloads):
    """Write one shard and its DALI index from serialized Examples, atomically.

    `payloads` yields each record's payload as parts (written without joining).
    Returns (records, bytes, sha256, index bytes, index sha256). The shard and the
    index appear under their names only when both are complete.
    """
    shard_path = Path(output_dir) / name
    index_path = Path(index_dir) / f"{name}.idx"
    shard_tmp = temp_name(shard_path)
    index_tmp = temp_name(index_path)
    digest = hashlib.sha256()
    offsets = []
    offset = flushed = 0
    try:
        fd = os.open(shard_tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            for payload in payloads:
                head, foot = frame(*payload)
                record = (head, *payload, foot)
                _write_all(fd, record)
                for part in record:
                    digest.update(part)
                size = sum(len(part) for part in record)
                offsets.append((offset, size))
                offset += size
                if offset - flushed >= WRITEBACK_EVERY:
                    _start_writeback(fd, flushed, offset - flushed)
                    flushed = offset
            os.fsync(fd)
        finally:
            os.close(fd)
        index_bytes = index_text(offsets).encode()
        with open(index_tmp, "wb") as f:
            f.write(index_bytes)
            f.flush()
            os.fsync(f.fileno())
        os.replace(shard_tmp, shard_path)
        os.replace(index_tmp, index_path)
        fsync_dir(shard_path.parent)
        if index_path.parent != shard_path.parent:
            fsync_dir(index_path.parent)
    except OSError as e:  # a full disk, a quota: say where, and that nothing is lost
        raise BuildError(f"{output_dir}: {e.strerror or e} while writing {name}; free space, then run the "
                         "same command again to resume") from None
    finally:
        for tmp in (shard_tmp, index_tmp):
            if tmp.exists():
                tmp.unlink()
    return len(offsets), offset, digest.hexdigest(), len(index_bytes), hashlib.sha256(index_bytes).hexdigest()


def _payloads(spec, inputs, on_error, skipped, reencoded):
    """Each record's payload parts, in order; bad inputs raise (fail) or go to `skipped` (skip)."""
    for number, entry in enumerate(spec.entries):
        exit_if_orphaned()
        try:
            stored = images.prepare(*inputs.read(number))
        except InputError as e:
            if on_error == "fail":
                raise
            skipped.append({"file": entry.relpath, "label": entry.label, "reason": e.problem})
            continue
        note = images.name_disagreement(entry.filename, stored)
        if stored.reencoded or note:
            reencoded.append({"file": entry.relpath, "reencoded": stored.reencoded, "note": note})
        synset, text = spec.classes[entry.label]
        yield encode_example_parts(
            encoded=stored.data,
            filename=entry.filename,
            height=stored.height,
            width=stored.width,
            label=entry.label,
            synset=synset,
            text=text,
            boxes=entry.boxes,
        )


def codec_of(reencoded):
    """What else a shard's bytes depend on: the encoder, when it holds re-encoded images."""
    return images.encoder_version() if any(r["reencoded"] for r in reencoded) else ""


def write_shard(spec, dest, on_error):
    """Write one planned shard from its input images (and upload it, for a URL); return its manifest entry."""
    skipped, reencoded = [], []
    with _ShardInputs(spec) as inputs:
        payloads = _payloads(spec, inputs, on_error, skipped, reencoded)
        if not dest.remote:
            figures = write_records(spec.name, dest.output, dest.index, payloads)
        else:
            with tempfile.TemporaryDirectory(prefix="imagenet-build-") as staging:
                figures = write_records(spec.name, staging, staging, payloads)
                # shard first, then its index: a listed index always has its shard
                storage.upload(Path(staging, spec.name), storage.join(dest.output, spec.name))
                storage.upload(Path(staging, spec.name + ".idx"), storage.join(dest.index, spec.name + ".idx"))
        identities = inputs.identities
    records, size, sha, index_size, index_sha = figures
    return {
        "split": spec.split,
        "name": spec.name,
        "records": records,
        "bytes": size,
        "sha256": sha,
        "index_bytes": index_size,
        "index_sha256": index_sha,
        "skipped": skipped,
        "reencoded": reencoded,
        "fingerprint": spec.fingerprint(on_error, codec_of(reencoded)),
        INPUT_STATE: spec.input_state(identities),  # moved to the manifest's "inputs" by the driver
    }


def rebuilt_sha256(spec, on_error):
    """sha256 of the shard the inputs give now, built in memory and not written (--verify-inputs)."""
    digest = hashlib.sha256()
    with _ShardInputs(spec) as inputs:
        for payload in _payloads(spec, inputs, on_error, [], []):
            head, foot = frame(*payload)
            for part in (head, *payload, foot):
                digest.update(part)
    return digest.hexdigest()


# ---------------------------------------------------------------- the driver


@dataclass(frozen=True)
class Destination:
    """Where shards go: a local folder, or a URL prefix of an object store.

    Local output is written in place (temp name, fsync, rename). For a URL each
    shard is written to a local temporary folder of the process writing it and
    uploaded whole when complete (an object appears only when its upload finishes),
    which also holds on a remote worker of a Beam runner.
    """

    output: str
    index: str

    @property
    def remote(self):
        return storage.is_url(self.output)

    def label_for_manifest(self):
        """The index folder as the manifest records it: relative to the output when inside it."""
        if self.remote:
            prefix = self.output + "/"
            return self.index[len(prefix):] if self.index.startswith(prefix) else self.index
        try:
            return str(Path(self.index).resolve().relative_to(Path(self.output).resolve()))
        except ValueError:
            return str(Path(self.index).resolve())


def _destination(output_dir, index_dir):
    output_dir = str(output_dir).rstrip("/") if storage.is_url(output_dir) else str(output_dir)
    index_dir = str(index_dir).rstrip("/") if index_dir else storage.join(output_dir, DEFAULT_INDEX_DIR)
    if storage.is_url(output_dir) != storage.is_url(index_dir):
        raise UsageError("--output-dir and --index-dir must both be local or both be URLs")
    return Destination(output_dir, index_dir)


def _layout_options(opts, index_dir_label, splits):
    """The options that fix which files a build has; a rerun must repeat them to resume."""
    return {
        "splits": sorted(splits),
        "train_shards": opts.train_shards if "train" in splits else None,
        "validation_shards": opts.validation_shards if "validation" in splits else None,
        "layout_threads": opts.layout_threads,
        "index_dir": index_dir_label,
        "classes_from_folders": opts.classes_from_folders,
    }


def _check_output_dir(dest, planned_names, overwrite):
    """Refuse a folder (or prefix) holding anything but our own files; with --overwrite clear ours."""
    output = dest.output
    index_name = storage.basename(dest.index)
    index_inside = storage.join(output, index_name) == dest.index
    strangers, ours = [], []
    for entry, is_dir in sorted(storage.listdir(output).items()):
        if entry == LOCK_NAME:
            continue  # this run's own lock
        if entry in (manifest_mod.MANIFEST_NAME, LABELS_NAME) or TEMP_NAME.match(entry):
            ours.append(storage.join(output, entry))
        elif SHARD_NAME.match(entry) and not is_dir:
            ours.append(storage.join(output, entry))
        elif entry == BEAM_RESULTS and is_dir:
            continue  # an interrupted Beam run's figures: the next run replaces them
        elif not (index_inside and entry == index_name and is_dir):
            strangers.append(entry)
    index_strangers = []
    for entry in sorted(storage.listdir(dest.index)):
        if entry == LOCK_NAME:
            continue
        if TEMP_NAME.match(entry) or (entry.endswith(".idx") and SHARD_NAME.match(entry[:-4])):
            ours.append(storage.join(dest.index, entry))
        elif index_inside:
            strangers.append(f"{index_name}/{entry}")
        else:
            index_strangers.append(entry)
    for folder, found, option in ((output, strangers, "--output-dir"), (dest.index, index_strangers, "--index-dir")):
        if found:
            raise BuildError(
                f"{folder}: holds files that are not from imagenet-build "
                f"({', '.join(found[:3])}{' ...' if len(found) > 3 else ''}); "
                f"choose an empty or new {option}"
            )
    foreign_shards = sorted(
        storage.basename(p) for p in ours if SHARD_NAME.match(storage.basename(p))
        and storage.basename(p) not in planned_names
    )
    if overwrite:
        for path in ours:
            storage.remove(path)
    elif foreign_shards:
        raise BuildError(
            f"{output}: holds shards of another layout ({foreign_shards[0]} ...); "
            "use --overwrite to replace that build, or another --output-dir"
        )
    else:
        for path in ours:
            if TEMP_NAME.match(storage.basename(path)):
                storage.remove(path)  # left by an interrupted run


def _scan_inputs(opts, cat, val_labels_file, pool):
    def val_labels():
        return catalog_mod.read_validation_labels(val_labels_file)

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


def _load_catalog(opts):
    if not opts.classes_from_folders:
        return catalog_mod.load_catalog(opts.labels_file, opts.metadata_file)
    if opts.labels_file or opts.train_tar or opts.validation_tar:
        raise UsageError("--classes-from-folders takes its classes from --train-dir (or --validation-dir): "
                         "not with --labels-file or the ImageNet archives")
    return catalog_mod.catalog_from_folders(opts.train_dir or opts.validation_dir, opts.metadata_file)


def _read_boxes(opts, cat):
    """Boxes from slim's CSV, or straight from the XML annotations through the same CSV lines."""
    if opts.bounding_box_file:
        return read_box_csv(opts.bounding_box_file)
    if opts.bbox_tar:
        lines, _, _ = boxes_to_csv_lines(opts.bbox_tar, cat.synsets)
        return parse_box_lines(lines, opts.bbox_tar)
    return {}


def _read_previous(output, overwrite, options):
    """The manifest of an earlier run in the output that this run may resume, or None."""
    if overwrite:
        return None
    try:
        previous = manifest_mod.read_manifest(output)
    except ValueError as e:
        raise BuildError(f"{e}; use --overwrite to start over") from None
    if previous and previous.get("options") != options:
        raise BuildError(
            f"{output}: holds a build made with other options ({previous.get('options')}); "
            "use --overwrite to replace it, or another --output-dir"
        )
    return previous


def convert(opts: ConvertOptions):
    """inputs -> shards + indexes + manifest. Returns the summary dict."""
    started = time.monotonic()
    for a, b in (("train_dir", "train_tar"), ("validation_dir", "validation_tar"),
                 ("bounding_box_file", "bbox_tar")):
        if getattr(opts, a) and getattr(opts, b):
            raise UsageError(f"give --{a.replace('_', '-')} or --{b.replace('_', '-')}, not both")
    if not (opts.train_dir or opts.validation_dir or opts.train_tar or opts.validation_tar):
        raise UsageError("nothing to convert: give --train-dir/--train-tar and/or --validation-dir/--validation-tar")
    if opts.on_error not in ("fail", "skip"):
        raise UsageError(f"--on-error must be fail or skip, not {opts.on_error!r}")
    workers = opts.workers or os.cpu_count() or 1
    if opts.runner not in ("local", "beam"):
        raise UsageError(f"--runner must be local or beam, not {opts.runner!r}")
    dest = _destination(opts.output_dir, opts.index_dir)
    with Workers(workers) as pool:
        return _convert(opts, pool, dest, started)


def _convert(opts, pool, dest, started):
    cat = _load_catalog(opts)
    boxes = _read_boxes(opts, cat)
    val_labels_file = opts.validation_labels_file or str(catalog_mod.DEFAULT_VALIDATION_LABELS_FILE)
    split_inputs = _scan_inputs(opts, cat, val_labels_file, pool)
    shard_counts = {"train": opts.train_shards, "validation": opts.validation_shards}
    plans = [
        plan_mod.SplitPlan(si, cat, boxes, shard_counts[si.split], opts.layout_threads) for si in split_inputs
    ]
    options = _layout_options(opts, dest.label_for_manifest(), [p.split for p in plans])
    _refuse_output_among_inputs(opts, dest)
    with _locked(dest):
        return _write(opts, pool, dest, started, cat, split_inputs, plans, options, val_labels_file, boxes)


def _locked(dest):
    """The output folder's lock, and the index folder's when it is another folder: one writer at a time."""
    stack = contextlib.ExitStack()
    stack.enter_context(FolderLock(dest.output))
    if storage.is_url(dest.index) or os.path.abspath(dest.index) != os.path.abspath(dest.output):
        stack.enter_context(FolderLock(dest.index))
    return stack


def _refuse_output_among_inputs(opts, dest):
    """An output inside an input folder would be read back as input by the next run: refuse it now."""
    if dest.remote:
        return
    for option, folder in (("--output-dir", dest.output), ("--index-dir", dest.index)):
        if os.path.exists(folder) and not os.path.isdir(folder):
            raise BuildError(f"{folder}: exists and is not a folder; choose another {option}")
    inputs = [(f"--{name.replace('_', '-')}", getattr(opts, name))
              for name in ("train_dir", "validation_dir") if getattr(opts, name)]
    for option, folder in (("--output-dir", dest.output), ("--index-dir", dest.index)):
        if option == "--index-dir" and not opts.index_dir:
            continue
        where = Path(folder).resolve()
        for input_option, input_folder in inputs:
            root = Path(input_folder).resolve()
            if where == root or root in where.parents:
                raise UsageError(f"{option} {folder} is inside {input_option} {input_folder}: "
                                 f"the next run would read the output as input; choose a {option} outside it")


def _write(opts, pool, dest, started, cat, split_inputs, plans, options, val_labels_file, boxes):
    """Everything that writes, under the output's lock."""
    previous = _read_previous(dest.output, opts.overwrite, options)
    _check_output_dir(dest, {n for p in plans for n in p.names}, opts.overwrite)
    if opts.classes_from_folders:
        labels = "".join(f"{name}\n" for name in cat.synsets).encode()
        storage.write_bytes(storage.join(dest.output, LABELS_NAME), labels)

    done = _shards_to_keep(previous, plans, dest, opts.on_error, pool, opts.verify_inputs)
    header = {
        "format": manifest_mod.FORMAT,
        "options": options,
        "inputs": _describe_inputs(opts, split_inputs, val_labels_file),
        "num_classes": cat.num_classes,
        "synsets": list(cat.synsets),  # label k is synsets[k - 1]
    }
    last_write = [time.monotonic()]

    def save(complete):
        manifest_mod.write_manifest(dest.output, _manifest(header, plans, done, complete))
        last_write[0] = time.monotonic()

    sizes = {name: p.size(k) for p in plans for k, name in enumerate(p.names)}
    total_images = sum(sizes.values())
    kept_images = sum(sizes[name] for name in done)
    bar = progress_bar(total_images, kept_images, "convert", "img")

    written = []

    def finished(task, entry):
        done[entry["name"]] = entry
        written.append(entry["name"])
        bar.update(len(task[0].entries))
        # at once after the first shard, then every few seconds: a failed last write still leaves
        # a manifest that vouches for the shards finished until then
        if len(written) == 1 or time.monotonic() - last_write[0] > MANIFEST_EVERY:
            save(False)

    todo = [(p, k) for p in plans for k, name in enumerate(p.names) if name not in done]
    tasks = ((p.spec(k), dest, opts.on_error) for p, k in todo)
    try:
        if opts.runner == "beam":
            from imagenet_build.beam_runner import run_on_beam

            results = storage.join(dest.output, BEAM_RESULTS) if dest.remote else None
            run_on_beam(write_shard, tasks, finished, opts.beam_options, results)
        else:
            pool.run(write_shard, tasks, finished)
    except KeyboardInterrupt:
        save(False)
        raise BuildError("interrupted; run the same command again to resume") from None
    except BaseException:
        save(False)
        raise
    finally:
        bar.close()
    save(True)
    seconds = time.monotonic() - started
    summary = _summary(dest.output, plans, done, len(todo), seconds, total_images - kept_images)
    if boxes:
        summary["boxes"] = _box_figures(boxes, split_inputs)
    return summary


def _box_figures(boxes, split_inputs):
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


def _shards_to_keep(previous, plans, dest, on_error, pool, verify_inputs):
    """{name: manifest entry} of the previous run's shards that this plan would write identically.

    A shard is kept when its sha256 and its index's still match the files, its fingerprint
    matches this plan, and its inputs are as they were (size and mtime of each file, see
    entry_identity); with verify_inputs, its inputs are also read and the shard rebuilt in
    memory to the same sha256 (then a touched but unchanged input does not count as changed).
    """
    listed = {entry["name"]: entry for entry in (previous or {}).get("shards", [])}
    states = (previous or {}).get("inputs", {}).get(SHARD_INPUTS, {})
    tasks = [(p.spec(k), listed[name], states.get(name), dest, on_error, verify_inputs)
             for p in plans for k, name in enumerate(p.names) if name in listed]
    kept = {}

    def keep(task, state):
        if state is not None:
            kept[task[0].name] = dict(task[1], **{INPUT_STATE: state})

    pool.run(_still_matches, tasks, keep)
    return kept


def _still_matches(spec, entry, previous_state, dest, on_error, verify_inputs):
    """The shard's input state now when the previous run's shard and index can be kept as they are, else None."""
    if spec.fingerprint(on_error, codec_of(entry["reencoded"])) != entry.get("fingerprint"):
        return None
    state = spec.input_state(spec.input_identities())
    if not verify_inputs and state != previous_state:
        return None
    if storage.sha256(storage.join(dest.output, spec.name)) != entry["sha256"]:
        return None
    if storage.sha256(storage.join(dest.index, f"{spec.name}.idx")) != entry["index_sha256"]:
        return None
    if verify_inputs and rebuilt_sha256(spec, on_error) != entry["sha256"]:
        return None
    return state


def _describe_inputs(opts, split_inputs, val_labels_file):
    def sha(path):
        return storage.sha256(str(path)) if path else None

    described = {
        "labels_file_sha256": sha(opts.labels_file or catalog_mod.DEFAULT_LABELS_FILE),
        "metadata_file_sha256": sha(opts.metadata_file or catalog_mod.DEFAULT_METADATA_FILE),
        "bounding_box_file_sha256": sha(opts.bounding_box_file or opts.bbox_tar),
    }
    for s in split_inputs:
        described[s.split] = {"layout": s.layout, "images": len(s)}
        if s.layout == "flat":
            described[s.split]["validation_labels_file_sha256"] = sha(val_labels_file)
    return described


def _manifest(header, plans, done, complete):
    finished = [done[name] for p in plans for name in p.names if name in done]
    shards = [{k: v for k, v in e.items() if k != INPUT_STATE} for e in finished]
    inputs = dict(header["inputs"], **{SHARD_INPUTS: {e["name"]: e[INPUT_STATE] for e in finished}})
    splits = {}
    for p in plans:
        entries = [done[name] for name in p.names if name in done]
        split = {
            "shards": p.num_shards,
            "shards_done": len(entries),
            "records": sum(e["records"] for e in entries),
            "bytes": sum(e["bytes"] for e in entries),
            "left_out": [{"file": f, "reason": r} for f, r in p.input.left_out],
        }
        if len(entries) == p.num_shards:  # label histogram of what the shards hold
            counts = Counter(p.input.labels)
            counts.subtract(skip["label"] for e in entries for skip in e["skipped"])
            split["label_counts"] = {str(k): v for k, v in sorted(counts.items()) if v}
        splits[p.split] = split
    return dict(
        header,
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


def _summary(output_dir, plans, done, written, seconds, images_processed):
    shards = [done[name] for p in plans for name in p.names]
    summary = {
        "ok": True,
        "output_dir": str(output_dir),
        "manifest": storage.join(output_dir, manifest_mod.MANIFEST_NAME),
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
