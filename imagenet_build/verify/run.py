"""Prove a folder of shards sound: framing, CRCs, DALI indexes, the shard set, the manifest, the records.

Reads only what was written. One task per shard (read once: framing, both CRCs,
sha256, every Example, the index against the real offsets); the checks across
shards (names, manifest, orphan indexes, totals) run after. Problems are
collected, never raised: a report lists them all (a bounded number per check)
with file, record number and byte offset.
"""

from __future__ import annotations

import hashlib
import io
import os
import stat
import time
from collections import Counter
from typing import IO, Any, Callable, Mapping, NamedTuple, Tuple

from imagenet_build.build.manifest import Manifest, ShardEntry, read_manifest
from imagenet_build.catalog.classes import (
    IMAGENET_CLASSES,
    IMAGENET_TOTALS,
    SUBSET_TRAIN_IMAGES,
)
from imagenet_build.encode.example import LIST_FIELD, SCHEMA, example_message_class
from imagenet_build.encode.images import DALI_STOPS, REENCODE, REFUSE, consequence, decide
from imagenet_build.encode.jpeg_header import exif_orientation
from imagenet_build.format.dali_index import check_index
from imagenet_build.format.naming import (
    LABELS_NAME,
    LISTINGS_NAME,
    LOCK_NAME,
    MANIFEST_NAME,
    index_dir_of,
    index_name,
    index_path,
    index_placement,
    no_shards_message,
    parse_shard_name,
    shard_name,
    shard_of_index,
)
from imagenet_build.format.tfrecord import OVERHEAD, FramingError, read_records, scan_lengths
from imagenet_build.infra import storage
from imagenet_build.infra.errors import BuildError, PathLike, UsageError
from imagenet_build.infra.lock import writing_now
from imagenet_build.infra.workers import Workers, exit_if_orphaned, progress_bar

SHOWN_PER_CHECK = 20
_SINGLE = {"image/height", "image/width", "image/colorspace", "image/channels", "image/class/label",
           "image/class/synset", "image/class/text", "image/format", "image/filename", "image/encoded"}
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_BOX_COORDS = [f"image/object/bbox/{c}" for c in ("xmin", "ymin", "xmax", "ymax")]
Finding = Tuple[str, str]  # (check, message) about one record
Place = Tuple[str, int, int]  # (shard name, record number, byte offset) of one record

# The checks, in report order, with what each one covers.
CHECKS = {
    "framing": "record lengths and their CRCs; the file ends where the last record ends",
    "crc": "payload CRC32C of every record",
    "index": "DALI index: present, numeric, contiguous from 0 to the file size, one line per record",
    "shard-set": "shard names consecutive from 00000, one -of-N per split, no strays, no orphan indexes",
    "manifest": "record counts, sizes and sha256 of shards and indexes against manifest.json, and its own sums",
    "example": "every record a slim Example: 15 keys, their types, sane values",
    "readers": "every JPEG one convert stores untouched: TensorFlow's, DALI's and torchvision's decoders read it",
    "labels": "labels in 1..K, one synset per label, counts against the manifest",
    "decode": "every image decodes to its recorded height and width (--deep)",
    "imagenet": "the full ILSVRC2012 totals (--expect-imagenet)",
}
# Findings that do not make a build unsound: reported apart from the problems, `ok` unchanged.
WARNINGS = {
    "exif-orientation": "stored JPEGs with an EXIF orientation: DALI's decoder turns them, TensorFlow's does not",
}


class Problems:
    """Problems by check: the first SHOWN_PER_CHECK of each kept, all counted."""

    def __init__(self) -> None:
        self.shown: list[dict[str, Any]] = []
        self.counts: Counter[str] = Counter()
        self._shown_counts: Counter[str] = Counter()

    def add(
        self,
        check: str,
        file: str | None = None,
        record: int | None = None,
        offset: int | None = None,
        message: str = "",
    ) -> None:
        self._keep({"check": check, "file": file, "record": record, "offset": offset, "message": message})
        self.counts[check] += 1

    def merge(self, shown: list[dict[str, Any]], counts: dict[str, int]) -> None:
        """Add a task's problems: those it kept, and the count of all it found."""
        for problem in shown:
            self._keep(problem)
        self.counts.update(counts)

    def _keep(self, problem: dict[str, Any]) -> None:
        if self._shown_counts[problem["check"]] < SHOWN_PER_CHECK:
            self._shown_counts[problem["check"]] += 1
            self.shown.append(problem)


# ------------------------------------------------------------------ one shard (a worker task)


def check_example(payload: bytes, deep: bool = False) -> tuple[int | None, str | None, list[Finding]]:
    """(label, synset, [(check, message)]) for one record; label is None when it has none usable."""
    try:
        example = example_message_class()()
        example.ParseFromString(payload)
    except Exception as e:  # protobuf raises its own DecodeError types
        return None, None, [("example", f"not a tf.train.Example: {e}")]
    values = {}
    for key, feature in example.features.feature.items():
        kind = feature.WhichOneof("kind")
        values[key] = (kind, list(getattr(feature, kind).value) if kind else [])
    found = _schema_problems(values)
    if found:
        return None, None, found

    def one(key: str) -> Any:
        return values[key][1][0]

    label, height, width = one("image/class/label"), one("image/height"), one("image/width")
    synset = one("image/class/synset").decode("utf-8", "replace")
    found.extend(_value_problems(one, label, height, width))
    found.extend(_encoded_problems(one("image/encoded"), one("image/format"), height, width))
    found.extend(_box_problems(values, label))
    if deep:
        found.extend(_check_decodes(one("image/encoded"), height, width))
    return label, synset, found


def _schema_problems(values: dict[str, tuple[str | None, list[Any]]]) -> list[Finding]:
    """Every key of slim's schema present, of its type, and the single-valued ones with one value."""
    found = []
    for key, kind in SCHEMA.items():
        if key not in values:
            found.append(("example", f"missing key {key}"))
        elif values[key][0] != LIST_FIELD[kind]:
            found.append(("example", f"{key} is {values[key][0]}, expected {LIST_FIELD[kind]}"))
        elif key in _SINGLE and len(values[key][1]) != 1:
            found.append(("example", f"{key} holds {len(values[key][1])} values, expected 1"))
    return found


def _value_problems(one: Callable[[str], Any], label: int, height: int, width: int) -> list[Finding]:
    """The single values: label, size, the constant fields, the names."""
    found = []
    if label < 1:
        found.append(("labels", f"label {label}: labels are 1-based (0 is background)"))
    if height <= 0 or width <= 0:
        found.append(("example", f"height/width {height}x{width} not positive"))
    for key, expected in (("image/colorspace", b"RGB"), ("image/channels", 3)):
        if one(key) != expected:
            found.append(("example", f"{key} is {one(key)!r}, expected {expected!r}"))
    if one("image/format") not in (b"JPEG", b"PNG"):
        found.append(("example", f"image/format is {one('image/format')!r}, expected b'JPEG' (or b'PNG')"))
    for key in ("image/class/synset", "image/class/text", "image/filename"):
        if not one(key):
            found.append(("example", f"{key} is empty"))
    return found


def _encoded_problems(encoded: bytes, image_format: bytes, height: int, width: int) -> list[Finding]:
    """The image is of its format; a JPEG's header agrees with the record."""
    if encoded[:2] != b"\xff\xd8" and not (image_format == b"PNG" and encoded[:8] == PNG_MAGIC):
        return [("example", f"image/encoded is not a {image_format.decode(errors='replace')} image")]
    if encoded[:2] == b"\xff\xd8":
        return _check_jpeg_header(encoded, height, width)
    return []


def _box_problems(values: dict[str, tuple[str | None, list[Any]]], label: int) -> list[Finding]:
    """The box lists: one length, values in [0, 1], the class's label, corners in order."""
    boxes = [values[k][1] for k in _BOX_COORDS]
    box_labels = values["image/object/bbox/label"][1]
    if len({len(b) for b in boxes} | {len(box_labels)}) != 1:
        return [("example", "bbox lists of different lengths")]
    if any(not 0.0 <= v <= 1.0 for column in boxes for v in column):
        return [("example", "bbox value outside [0, 1]")]
    if any(v != label for v in box_labels):
        return [("example", "bbox/label differs from the class label")]
    if any(xmin > xmax or ymin > ymax for xmin, ymin, xmax, ymax in zip(*boxes)):
        return [("example", "bbox with xmin > xmax or ymin > ymax")]
    return []


def _check_jpeg_header(encoded: bytes, height: int, width: int) -> list[Finding]:
    """The stored JPEG's header against the record, and convert's rule for what it stores untouched: a JPEG
    it would refuse (or re-encode: one a decoder we serve cannot read as it is) is a problem."""
    decision = decide(encoded)
    header = decision.header
    if header is None:
        return [("example", f"image/encoded is a {decision.reason}")]
    found: list[Finding] = []
    if (header.height, header.width) != (height, width):
        found.append(("example", f"JPEG header says {header.width}x{header.height}, record says {width}x{height}"))
    if decision.action == REFUSE:
        found.append(("example", decision.reason))
    elif decision.action == REENCODE:
        at = f"byte {decision.at} of image/encoded"
        where = f"at {at}" if decision.reason in DALI_STOPS else f"(its frame header at {at})"
        found.append(("readers", f"{decision.reason} {where}: {consequence(decision.reason)} "
                      "(convert re-encodes such an image)"))
    orientation = exif_orientation(encoded)
    if orientation != 1:
        turned = "its shape and pixels" if orientation >= 5 else "its pixels"
        found.append(("exif-orientation", f"EXIF orientation {orientation}: DALI's decoder applies it and TensorFlow's "
                      f"does not, so they disagree about {turned} (convert --resize ... --exif-transpose, or "
                      "--resize-all, stores it upright or without EXIF)"))
    return found


def _check_decodes(encoded: bytes, height: int, width: int) -> list[Finding]:
    from PIL import Image

    try:
        with Image.open(io.BytesIO(encoded)) as image:
            image.load()
            size = image.size
    except Exception as e:  # Pillow raises many kinds for a broken image
        return [("decode", f"image does not decode: {e}")]
    if size != (width, height):
        return [("decode", f"image is {size[0]}x{size[1]}, record says {width}x{height}")]
    return []


class _HashingReader:
    """A file's read() that also feeds what it returns to a digest: one pass for records and sha256."""

    def __init__(self, f: IO[bytes], digest: Any) -> None:
        self._f, self._digest = f, digest

    def read(self, n: int) -> bytes:
        data = self._f.read(n)
        self._digest.update(data)
        return data


class ShardCheck(NamedTuple):
    """One worker task of verify: every per-shard check of this shard and its index."""

    shard_path: str
    index_path: str
    quick: bool
    deep: bool


def check_shard(shard_path: str, index_path: str, quick: bool, deep: bool) -> dict[str, Any]:
    """All per-shard checks; returns a dict of figures and problems (picklable)."""
    name = storage.basename(shard_path)
    problems, warnings = Problems(), Problems()
    size = storage.size(shard_path)
    entries: list[tuple[int, int]] = []
    digest = None if quick else hashlib.sha256()
    label_pairs: dict[tuple[int, str], list[int]] = {}  # (label, synset): [records, first record, its offset]
    # open_read gives raw or buffered binary files, which have the readinto that IO[bytes] does not declare
    with storage.open_read(shard_path, random_access=quick) as raw, \
            io.BufferedReader(raw, 1 << 20) as f:  # type: ignore[type-var]
        try:
            if quick:
                for offset, length in scan_lengths(f, size):
                    entries.append((offset, OVERHEAD + length))
            else:
                for offset, payload, crc_ok in read_records(_HashingReader(f, digest), size):
                    exit_if_orphaned()
                    number = len(entries)
                    entries.append((offset, OVERHEAD + len(payload)))
                    if not crc_ok:
                        problems.add("crc", name, number, offset, "payload CRC32C mismatch (corrupt record)")
                        continue
                    label, synset, found = check_example(payload, deep)
                    for check, message in found:
                        (warnings if check in WARNINGS else problems).add(check, name, number, offset, message)
                    if label is not None and synset is not None:  # the two come together
                        label_pairs.setdefault((label, synset), [0, number, offset])[0] += 1
        except FramingError as e:
            problems.add("framing", name, len(entries), e.offset, e.message)
    if not entries and "framing" not in problems.counts:
        problems.add("framing", name, None, 0, "shard holds no records")
    index_bytes, unreadable = _read_index(index_path)
    if unreadable:
        problems.add("index", storage.basename(index_path), None, None, unreadable)
    elif "framing" not in problems.counts:  # an index can only be judged against sound framing
        for line, at, message in check_index(index_bytes, entries, size):
            problems.add("index", storage.basename(index_path), line, at, message)
    index_sha = hashlib.sha256(index_bytes).hexdigest() if index_bytes is not None and not quick else None
    return {
        "name": name,
        "records": len(entries),
        "bytes": size,
        "sha256": digest.hexdigest() if digest is not None and "framing" not in problems.counts else None,
        "index_sha256": index_sha,
        "label_pairs": label_pairs,
        "problems": problems.shown,
        "counts": dict(problems.counts),
        "warnings": warnings.shown,
        "warning_counts": dict(warnings.counts),
    }


def _read_index(index_path: str) -> tuple[bytes | None, str]:
    """(the index's bytes, or None where there is none; why it cannot be read, or "")."""
    if not storage.is_url(index_path) and os.path.lexists(index_path) and not os.path.isfile(index_path):
        return None, f"not a regular file ({_file_kind(index_path)}): DALI cannot read it"
    try:
        return storage.read_bytes(index_path), ""
    except FileNotFoundError:
        return None, ""
    except OSError as e:
        return None, f"cannot be read: {e.strerror or e}"


def _file_kind(path: str) -> str:
    """What a path that is no regular file is, in words."""
    if not os.path.exists(path):
        return "a link to nothing"
    mode = os.stat(path).st_mode
    return "a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "a socket or device"


# ------------------------------------------------------------------ the folder


def _shard_set(root: str, index_dir: str, problems: Problems) -> dict[str, list[tuple[int, str]]]:
    """{split: [(index, path)]} of the shards in root; stray files and name gaps reported."""
    shards: dict[str, list[tuple[int, int, str]]] = {}
    placement = index_placement(root, index_dir)
    for entry, is_dir in sorted(storage.listdir(root).items()):
        parsed = parse_shard_name(entry)
        path = storage.join(root, entry)
        if parsed and not is_dir and not storage.is_url(root) and not os.path.isfile(path):  # reading would block
            problems.add("shard-set", entry, None, None, f"not a regular file ({_file_kind(path)})")
        elif parsed and not is_dir:
            shards.setdefault(parsed.split, []).append((parsed.number, parsed.total, path))
        elif entry in (MANIFEST_NAME, LABELS_NAME, LOCK_NAME) or (is_dir and entry == LISTINGS_NAME) or (
                is_dir and placement == "inside" and entry == storage.basename(index_dir)) or (
                placement == "beside" and shard_of_index(entry)):  # an index beside the shards: _orphan_indexes
            continue
        else:
            problems.add("shard-set", entry, None, None, "stray file: not a shard, an index folder or the manifest")
    for split, items in shards.items():
        counts = sorted({count for _, count, _ in items})
        if len(counts) > 1:
            problems.add("shard-set", f"{split}-*", None, None,
                         f"shards of {split} disagree on their total: -of-{', -of-'.join(f'{c:05d}' for c in counts)}")
        count = max(counts)
        present = {index for index, _, _ in items}
        missing = [k for k in range(count) if k not in present]
        for k in missing:
            problems.add("shard-set", shard_name(split, k, count), None, None, "shard missing")
        for index, _, path in items:
            if index >= count:
                problems.add("shard-set", storage.basename(path), None, None, f"shard number beyond -of-{count:05d}")
    return {split: sorted((index, path) for index, _, path in items) for split, items in shards.items()}


def _orphan_indexes(root: str, index_dir: str, shard_names: set[str], problems: Problems) -> None:
    beside = index_placement(root, index_dir) == "beside"  # then the shards and the rest are _shard_set's
    prefix = "" if beside else storage.basename(index_dir) + "/"
    for entry in sorted(storage.listdir(index_dir)):
        if entry.startswith("."):
            continue
        shard = shard_of_index(entry)
        if shard is None and not beside:
            problems.add("shard-set", f"{prefix}{entry}", None, None, "stray file in the index folder")
        elif shard is not None and shard not in shard_names:
            problems.add("index", f"{prefix}{entry}", None, None, "index file with no shard")


def _check_manifest(
    manifest: Manifest, results: dict[str, dict[str, Any]], quick: bool, problems: Problems, notes: list[str]
) -> None:
    if not manifest.get("complete"):
        problems.add("manifest", MANIFEST_NAME, None, None, f"the build is not complete: {_how_it_ended(manifest)}")
    listed = {entry["name"]: entry for entry in manifest.get("shards", [])}
    for name, result in results.items():
        entry = listed.get(name)
        if entry is None:
            problems.add("manifest", name, None, None, "shard not listed in manifest.json")
            continue
        if result["records"] != entry["records"]:
            problems.add("manifest", name, None, None,
                         f"{result['records']} records, manifest says {entry['records']}")
        if result["bytes"] != entry["bytes"]:
            problems.add("manifest", name, None, None, f"{result['bytes']} bytes, manifest says {entry['bytes']}")
        if not quick and result["sha256"] != entry["sha256"]:
            problems.add("manifest", name, None, None, "sha256 differs from the manifest's")
        if not quick and result["index_sha256"] and result["index_sha256"] != entry.get("index_sha256"):
            problems.add("manifest", index_name(name), None, None, "index sha256 differs from the manifest's")
    for name in listed:
        if name not in results:
            problems.add("manifest", name, None, None, "listed in manifest.json but missing")
    _check_manifest_figures(manifest, problems)
    if quick:
        notes.append("--quick: sha256 and label counts against the manifest not checked")


def _how_it_ended(manifest: Manifest) -> str:
    """What the manifest of an incomplete build says of the run that wrote it last."""
    ended = manifest.get("ended")
    if ended == "failed":
        return f"convert failed: {manifest.get('error') or 'no error recorded'}"
    if ended == "interrupted":
        return "convert was interrupted (run the same command again to resume)"
    return "convert stopped without a word (killed, or it crashed); run the same command again to resume"


def _same_bytes(results: dict[str, dict[str, Any]], problems: Problems) -> None:
    """Two shards with the same bytes (a copy under another number): every record of one is in the other,
    and a reader takes them twice an epoch. Without a manifest, nothing else would notice."""
    first: dict[str, str] = {}
    for name in sorted(results):
        digest = results[name]["sha256"]
        if digest is None:  # --quick, or broken framing
            continue
        if digest in first:
            problems.add("shard-set", name, None, None,
                         f"the same bytes as {first[digest]}: its records would be read twice an epoch")
        first.setdefault(digest, name)


def _check_manifest_figures(manifest: Manifest, problems: Problems) -> None:
    """The manifest against itself: each shard listed once under its own split, and each split's and the
    totals' figures the sum of its shard entries (trainer-check and readers take a split's records from
    there: a wrong figure fails them, or sizes an epoch wrong)."""
    entries = manifest.get("shards", [])
    for name, times in sorted(Counter(entry["name"] for entry in entries).items()):
        if times > 1:
            problems.add("manifest", name, None, None, f"listed {times} times in manifest.json")
    by_split: dict[str, list[ShardEntry]] = {}
    for entry in entries:
        parsed = parse_shard_name(entry["name"])
        if parsed is None or parsed.split != entry["split"]:
            problems.add("manifest", entry["name"], None, None, f"listed under split {entry['split']!r}")
        by_split.setdefault(entry["split"], []).append(entry)
    if not manifest.get("complete"):
        return  # the figures of an interrupted build are those of the shards done so far
    splits: Mapping[str, Mapping[str, Any]] = manifest.get("splits", {})
    totals: Mapping[str, Any] = manifest.get("totals", {})
    sums = [(f"splits.{split}", splits.get(split), by_split.get(split, []), ("shards", "records", "bytes"))
            for split in sorted(set(by_split) | set(splits))] + [("totals", totals, entries, ("records", "bytes"))]
    for where, figures, listed, keys in sums:
        if figures is None:
            problems.add("manifest", MANIFEST_NAME, None, None, f"{where}: missing, yet shards of it are listed")
            continue
        actual = {"shards": len(listed), "records": sum(e["records"] for e in listed),
                  "bytes": sum(e["bytes"] for e in listed)}
        for key in keys:
            if key in figures and figures[key] != actual[key]:
                problems.add("manifest", MANIFEST_NAME, None, None,
                             f"{where}.{key} is {figures[key]}, its shard entries add up to {actual[key]}")


def _check_labels(
    manifest: Manifest | None,
    seen: dict[tuple[int, str], tuple[int, Place]],
    split_counts: dict[str, Counter[int]],
    problems: Problems,
    expect_imagenet: bool,
    notes: list[str],
) -> None:
    """`seen`: {(label, synset): (records, the first)}; `split_counts`: {split: Counter of labels}.

    Each problem names a record that shows it: the first with the label, or where a label and synset
    disagree, the first record of the rarest pair (most likely the wrong one)."""
    num_classes = (manifest or {}).get("num_classes") or (IMAGENET_CLASSES if expect_imagenet else None)
    synsets = (manifest or {}).get("synsets")
    if num_classes is None:
        notes.append("no manifest: labels checked to be >= 1 and consistent, not against a class count")
    by_label: dict[int, dict[str, tuple[int, Place]]] = {}
    by_synset: dict[str, dict[int, tuple[int, Place]]] = {}
    for (label, synset), seen_pair in seen.items():
        by_label.setdefault(label, {})[synset] = seen_pair
        by_synset.setdefault(synset, {})[label] = seen_pair
    for label, pairs in sorted(by_label.items()):
        if num_classes is not None and label > num_classes:
            problems.add("labels", *min(place for _, place in pairs.values()),
                         f"label {label} above the {num_classes} classes")
        if len(pairs) > 1:
            problems.add("labels", *_rarest(pairs), f"label {label} carries several synsets: {sorted(pairs)}")
        elif synsets and 1 <= label <= len(synsets) and set(pairs) != {synsets[label - 1]}:
            ((name, (_, place)),) = pairs.items()
            problems.add("labels", *place, f"label {label} carries {name}, the labels file says {synsets[label - 1]}")
    for synset, labels in sorted(by_synset.items()):
        if len(labels) > 1:
            problems.add("labels", *_rarest(labels), f"synset {synset} under several labels: {sorted(labels)}")
    if manifest:
        _check_label_counts(manifest, split_counts, problems)


def _rarest(pairs: dict[Any, tuple[int, Place]]) -> Place:
    """The first record of the pair with the fewest records (of two as common, the one met later)."""
    return max(pairs.values(), key=lambda seen_pair: (-seen_pair[0], seen_pair[1]))[1]


def _check_label_counts(manifest: Manifest, split_counts: dict[str, Counter[int]], problems: Problems) -> None:
    """The records of each label per split against the manifest's counts."""
    for split, counts in split_counts.items():
        expected = manifest.get("splits", {}).get(split, {}).get("label_counts")
        if expected is None:
            continue
        if {str(k): v for k, v in sorted(counts.items())} != expected:
            differ = sorted(set(expected) ^ {str(k) for k in counts}
                            | {k for k, v in expected.items() if counts.get(int(k)) != v}, key=int)
            problems.add("labels", split, None, None,
                         f"label counts differ from the manifest for labels {', '.join(differ[:10])}")


def _refuse_while_written(folders: list[str]) -> None:
    """A build being written is no build to judge: its temporary files would read as strays."""
    for folder in dict.fromkeys(folders):
        writer = writing_now(folder)
        if writer:
            raise BuildError(f"{folder}: {writer} is writing this folder; verify when it ends")


def expected_totals(manifest: Manifest | None) -> tuple[dict[str, int], str]:
    """({split: records}, what) a full build should hold: ILSVRC2012's, the copy's own (the face-blurred
    release lacks a few images), and a shipped subset's train count."""
    from imagenet_build.sources.copies import LAYOUTS

    expected, what = dict(IMAGENET_TOTALS), "ILSVRC2012"
    inputs, options = (manifest or {}).get("inputs", {}), (manifest or {}).get("options", {})
    layout = (inputs.get("source") or {}).get("layout")
    for known in LAYOUTS:
        if known.name == layout and known.totals:
            expected, what = dict(known.totals), known.name
    subset = options.get("subset")
    if subset in SUBSET_TRAIN_IMAGES:
        expected["train"], what = SUBSET_TRAIN_IMAGES[subset], f"{what} --subset {subset}"
    return expected, what


def verify(
    root: PathLike,
    index_dir: str | None = None,
    quick: bool = False,
    deep: bool = False,
    expect_imagenet: bool = False,
    workers: int = 0,
) -> dict[str, Any]:
    """Check a build folder; returns {"ok", "problems", "summary"} (never raises for a bad shard)."""
    started = time.monotonic()
    folder = str(root).rstrip("/") if storage.is_url(root) else str(root)
    if not storage.is_url(folder) and not os.path.isdir(folder):
        raise BuildError(f"{folder}: not a folder")
    if quick and deep:
        raise UsageError("--quick and --deep exclude each other")
    problems, warnings = Problems(), Problems()
    notes: list[str] = []
    try:
        manifest = read_manifest(folder)
    except ValueError as e:
        problems.add("manifest", MANIFEST_NAME, None, None, str(e))
        manifest = None
    if manifest is None:
        notes.append("no manifest.json: shards verified structurally only")
    index_dir = index_dir_of(folder, manifest, index_dir)
    _refuse_while_written([folder, index_dir])
    by_split = _shard_set(folder, index_dir, problems)
    paths = [path for shards in by_split.values() for _, path in shards]
    if not paths:
        raise BuildError(no_shards_message(folder, "shards named <split>-NNNNN-of-NNNNN"))
    _orphan_indexes(folder, index_dir, {storage.basename(p) for p in paths}, problems)

    results: dict[str, dict[str, Any]] = {}
    seen: dict[tuple[int, str], tuple[int, Place]] = {}
    split_counts: dict[str, Counter[int]] = {}
    bar = progress_bar(len(paths), 0, "verify", "shard")

    def done(task: ShardCheck, result: dict[str, Any]) -> None:
        shard = parse_shard_name(result["name"])
        assert shard is not None  # _shard_set listed only the names it parsed
        counts = split_counts.setdefault(shard.split, Counter())
        for (label, synset), (count, number, offset) in result.pop("label_pairs").items():
            place = (result["name"], number, offset)
            before, first = seen.get((label, synset), (0, place))
            seen[(label, synset)] = (before + count, min(first, place))
            counts[label] += count
        problems.merge(result.pop("problems"), result.pop("counts"))
        warnings.merge(result.pop("warnings"), result.pop("warning_counts"))
        results[result["name"]] = result
        bar.update(1)

    tasks = [ShardCheck(p, index_path(p, index_dir), quick, deep) for p in paths]
    try:
        with Workers(min(workers or os.cpu_count() or 1, len(tasks))) as pool:
            pool.run(check_shard, tasks, done)
    finally:
        bar.close()

    if manifest:
        _check_manifest(manifest, results, quick, problems, notes)
    _same_bytes(results, problems)
    if not quick:
        _check_labels(manifest, seen, split_counts, problems, expect_imagenet, notes)
    split_records = {split: sum(results[storage.basename(p)]["records"] for _, p in shards)
                     for split, shards in by_split.items()}
    if expect_imagenet:
        seen_labels = None if quick else {label for label, _ in seen}
        _check_imagenet_totals(manifest, split_records, seen_labels, problems, notes)
    seconds = time.monotonic() - started
    total_bytes = sum(r["bytes"] for r in results.values())
    summary = {
        "checks": _checks_run(bool(manifest), quick, deep, expect_imagenet),
        "folder": str(folder),
        "index_dir": str(index_dir),
        "mode": "quick" if quick else ("deep" if deep else "full"),
        "shards": len(results),
        "records": sum(split_records.values()),
        "splits": {split: {"shards": len(by_split[split]), "records": n} for split, n in split_records.items()},
        "bytes": total_bytes,
        "manifest": manifest is not None,
        "problem_counts": dict(sorted(problems.counts.items())),
        "warning_counts": dict(sorted(warnings.counts.items())),
        "notes": notes,
        "seconds": round(seconds, 3),
        "records_per_second": round(sum(split_records.values()) / seconds, 1) if seconds else None,
        "mb_per_second": round(total_bytes / 1e6 / seconds, 1) if seconds else None,
    }
    # warnings never change `ok` (nor the exit code): the build is sound, but readers may disagree
    return {"ok": not problems.counts, "problems": problems.shown, "warnings": warnings.shown, "summary": summary}


def _check_imagenet_totals(manifest: Manifest | None, split_records: dict[str, int], seen_labels: set[int] | None,
                           problems: Problems, notes: list[str]) -> None:
    """Each split's records and the classes against ImageNet's (the labels the records hold, or with --quick
    the manifest's class count)."""
    expected, what = expected_totals(manifest)
    for split, total in expected.items():
        if split_records.get(split) != total:
            problems.add("imagenet", split, None, None, f"{split_records.get(split, 0)} records, {what} has {total:,}")
    classes = len(seen_labels) if seen_labels is not None else (manifest or {}).get("num_classes")
    if classes is None:
        notes.append("--expect-imagenet: classes not counted (--quick reads no labels, and there is no manifest)")
    elif classes != IMAGENET_CLASSES:
        problems.add("imagenet", "classes", None, None, f"{classes:,} classes, {what} has {IMAGENET_CLASSES:,}")


def _checks_run(manifest: bool, quick: bool, deep: bool, expect_imagenet: bool) -> list[str]:
    """The checks a verify with these options makes, in report order."""
    checks = ["framing", "index", "shard-set"] + (["manifest"] if manifest else [])
    checks += [] if quick else ["crc", "example", "readers", "labels"]
    checks += (["decode"] if deep else []) + (["imagenet"] if expect_imagenet else [])
    return [c for c in CHECKS if c in checks]


def format_report(result: dict[str, Any]) -> list[str]:
    """The report as text lines, problems grouped by check."""
    s = result["summary"]
    lines = [
        f"{s['folder']}: {s['shards']} shards, {s['records']} records, {s['bytes'] / 1e6:.1f} MB "
        f"({s['mode']} check, {s['seconds']:.1f} s, {s['mb_per_second']} MB/s)"
    ]
    for split, figures in s["splits"].items():
        lines.append(f"  {split}: {figures['records']} records in {figures['shards']} shards")
    by_check: dict[str, list[dict[str, Any]]] = {}
    for problem in result["problems"]:
        by_check.setdefault(problem["check"], []).append(problem)
    for check in CHECKS:
        count = s["problem_counts"].get(check, 0)
        status = f"{count} problem(s)" if count else ("ok" if check in s["checks"] else "not run")
        lines.append(f"{check:10s} {status:16s} {CHECKS[check]}")
        for p in by_check.get(check, []):
            where = ", ".join(
                part for part in (
                    p["file"],
                    f"record {p['record']}" if p["record"] is not None and p["check"] != "index" else None,
                    f"line {p['record']}" if p["record"] is not None and p["check"] == "index" else None,
                    f"byte {p['offset']}" if p["offset"] is not None else None,
                ) if part
            )
            lines.append(f"    {where}: {p['message']}")
        if count > len(by_check.get(check, [])):
            lines.append(f"    ... and {count - len(by_check.get(check, []))} more")
    by_warning: dict[str, list[dict[str, Any]]] = {}
    for warning in result.get("warnings", []):
        by_warning.setdefault(warning["check"], []).append(warning)
    for check, count in s.get("warning_counts", {}).items():
        lines.append(f"warning: {check}: {count} record(s): {WARNINGS.get(check, '')}")
        for w in by_warning.get(check, []):
            lines.append(f"    {w['file']}, record {w['record']}, byte {w['offset']}: {w['message']}")
        if count > len(by_warning.get(check, [])):
            lines.append(f"    ... and {count - len(by_warning.get(check, []))} more")
    for note in s["notes"]:
        lines.append(f"note: {note}")
    lines.append("OK: sound" if result["ok"] else f"FAILED: {sum(s['problem_counts'].values())} problem(s)")
    return lines
