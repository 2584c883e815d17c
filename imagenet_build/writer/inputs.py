"""convert's list stage: what the request names, read: the classes, the boxes, each split's images, the subset.

The copy's scans list each split in slim's order (sources); --subset then keeps the images it
names. After this nothing is listed again: the plan is a function of these values alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from imagenet_build.catalog import classes as catalog_mod
from imagenet_build.catalog.boxes import boxes_to_csv_lines, parse_box_lines, read_box_csv
from imagenet_build.catalog.real_labels import RealLabelTable, read_real_labels
from imagenet_build.infra import read_door, storage
from imagenet_build.infra.errors import BuildError, InputError, PathLike
from imagenet_build.infra.workers import Workers
from imagenet_build.model import SplitInput, file_name
from imagenet_build.request import ConvertRequest
from imagenet_build.sources import VALIDATION_NAME
from imagenet_build.sources.copy_rules import validation_number

if TYPE_CHECKING:
    from imagenet_build.sources.spool import Spool


@dataclass(frozen=True)
class Inputs:
    """A build's inputs, listed."""

    catalog: catalog_mod.Catalog
    splits: list[SplitInput]  # in slim's order, each; --subset applied
    boxes: dict[str, bytes]  # image file name -> packed boxes
    subset: str | None  # --subset as the manifest records it: a shipped list's name, or a file's name and sha256
    real_labels: dict[str, tuple[int, ...]] | None = None  # --real-labels: validation image file name -> its labels
    real_labels_file: str | None = None  # --real-labels as the manifest records it: the file's name and sha256
    spool: Optional[Spool] = None  # what the images are read from, where the copy decompresses its archives


def list_inputs(request: ConvertRequest, pool: Workers, spool: Optional[Spool] = None) -> Inputs:
    """The classes first, then a bad --subset list or real.json, then the boxes: all before the long scan (the
    copy's spool, writer/spooling.py's, decompressed for both splits at once before it)."""
    catalog = load_catalog(request)
    listed = catalog_mod.read_subset(request.subset) if request.subset else None
    real = read_real_labels(request.real_labels, catalog) if request.real_labels else None
    boxes = read_boxes(request, catalog)
    if spool is not None:
        spool.decompress(pool)  # every split's archives in one batch
    splits = _scan(request, catalog, pool)
    subset = None
    if listed:
        subset, splits = _apply_subset(request, listed, splits)
    if request.real_labels is None or real is None:
        return Inputs(catalog, splits, boxes, subset, spool=spool)
    by_name = _label_validation(request.real_labels, real, splits)
    recorded = f"{storage.basename(request.real_labels)} sha256:{read_door.sha256(request.real_labels)}"
    return Inputs(catalog, splits, boxes, subset, by_name, recorded, spool)


def _label_validation(path: str, real: RealLabelTable, splits: list[SplitInput]) -> dict[str, tuple[int, ...]]:
    """{file name: ReaL labels} of every validation image, matched by its ILSVRC2012 name (validation_number:
    whichever copy it came from); an image of another name, or one real.json has no entry for, is refused."""
    (validation,) = [s for s in splits if s.split == "validation"]
    by_name: dict[str, tuple[int, ...]] = {}
    left_out = 0
    for relpath in validation.relpaths:
        number = validation_number(relpath)
        if number is None:
            raise InputError(f"{validation.root}/{relpath}",
                             "not an ILSVRC2012_val_<8 digits>.JPEG name: --real-labels matches real.json's "
                             "labels to the ILSVRC2012 validation images by that name")
        if not 1 <= number <= len(real.entries):
            raise InputError(path, f"has no entry for {file_name(relpath)} ({len(real.entries):,} entries)")
        by_name[file_name(relpath)], lacking = real.labels(number)
        left_out += lacking
    labelled = sum(1 for labels in by_name.values() if labels)
    validation.notes.append(f"validation: ReaL labels from {storage.basename(path)}: {labelled:,} of "
                            f"{len(by_name):,} images labelled, {len(by_name) - labelled:,} with none")
    if left_out:
        validation.notes.append(f"validation: {left_out:,} ReaL label(s) of these images left out: their synsets "
                                "are not classes of this build")
    return by_name


def load_catalog(request: ConvertRequest) -> catalog_mod.Catalog:
    """The labels file's classes, or with --classes-from-folders the class folders'."""
    if request.classes_from is None:
        return catalog_mod.load_catalog(request.labels_file, request.metadata_file)
    return catalog_mod.catalog_from_folders(request.classes_from, request.metadata_file)


def read_boxes(request: ConvertRequest, catalog: catalog_mod.Catalog) -> dict[str, bytes]:
    """Boxes from slim's CSV, or straight from the XML annotations through the same CSV lines, or the copy's own."""
    if request.copy.carries_boxes and not (request.bounding_box_file or request.bbox_tar):
        boxes: dict[str, bytes] = request.copy.boxes(catalog)
        return boxes
    if request.bounding_box_file:
        return read_box_csv(request.bounding_box_file)
    if request.bbox_tar:
        lines, _, _ = boxes_to_csv_lines(request.bbox_tar, catalog.synsets)
        return parse_box_lines(lines, request.bbox_tar)
    return {}


def _scan(request: ConvertRequest, catalog: catalog_mod.Catalog, pool: Workers) -> list[SplitInput]:
    """Both splits of the copy."""
    copy = request.copy

    def validation_labels() -> list[str]:
        return catalog_mod.read_validation_labels(request.validation_labels_file)

    splits = []
    if "train" in copy.splits:
        splits.append(copy.scan_train(catalog, request.on_error, pool))
    if "validation" in copy.splits:
        splits.append(copy.scan_validation(catalog, request.on_error, pool, validation_labels,
                                           request.validation_labels_file))
    return splits


def _apply_subset(
    request: ConvertRequest, listed: tuple[str, frozenset[str]], splits: list[SplitInput]
) -> tuple[str, list[SplitInput]]:
    """Keep only the images --subset names (original file names); labels keep their values.

    Validation names (ILSVRC2012_val_*) select from the validation split, all others from
    train; a split the list names no image of is kept whole. A listed name the source lacks
    is an error (listed as left out with --on-error skip).
    """
    label, names = listed
    wanted: dict[str, frozenset[str] | set[str]] = {"validation": {n for n in names if VALIDATION_NAME.match(n)}}
    wanted["train"] = names - wanted["validation"]
    kept = []
    for split_input in splits:
        chosen = wanted.get(split_input.split) or set()
        if not chosen:
            split_input.notes.append(f"--subset {label} names no {split_input.split} image: all of them kept")
            kept.append(split_input)
            continue
        only = split_input.only(chosen)
        missing = chosen - {file_name(relpath) for relpath in only.relpaths}
        if missing:
            first = sorted(missing)[0]
            if request.on_error == "fail":
                raise BuildError(f"--subset {label}: {len(missing):,} listed image(s) are not in the "
                                 f"{split_input.split} source, e.g. {first}; --on-error skip builds without them")
            only.left_out.extend((name, f"listed in --subset {label}, not in the source") for name in sorted(missing))
        kept.append(only)
    if request.subset in catalog_mod.SUBSETS:
        return label, kept
    return f"{storage.basename(label)} sha256:{read_door.sha256(label)}", kept


def describe(request: ConvertRequest, inputs: Inputs) -> dict[str, Any]:
    """The inputs as the manifest records them: the list files' sha256, the kind of copy --from found, each
    split's arrangement and size."""
    def sha(path: PathLike | None) -> str | None:
        return read_door.sha256(str(path)) if path else None

    described: dict[str, Any] = {
        "labels_file_sha256": sha(request.labels_file or catalog_mod.DEFAULT_LABELS_FILE),
        "metadata_file_sha256": sha(request.metadata_file or catalog_mod.DEFAULT_METADATA_FILE),
        "bounding_box_file_sha256": sha(request.bounding_box_file or request.bbox_tar),
    }
    if request.from_paths:
        # the key keeps its name "layout" for the manifests already written; it holds the copy's kind
        described["source"] = {"layout": request.copy.kind, "description": request.copy.description,
                               **request.copy.recorded(inputs.catalog)}
    for s in inputs.splits:
        # the key keeps its name "layout" for the manifests already written; it holds the split's arrangement
        described[s.split] = {"layout": s.arrangement, "images": len(s)}
        if s.arrangement == "flat":
            described[s.split]["validation_labels_file_sha256"] = sha(request.validation_labels_file)
    return described
