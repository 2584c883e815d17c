"""convert's summary: what a run did, as the command prints it (text, or --json's document).

Built from the builds' shards once the run has ended: each build's splits, shards written and
kept, images left out and re-encoded, the notes of the scans; for a --resize run each build's own
under its folder's name; what --from found, and how the boxes matched the images.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, TypedDict

from imagenet_build.catalog.boxes import BOX_BYTES
from imagenet_build.format.build_figures import figures_of, resized_count
from imagenet_build.format.naming import MANIFEST_NAME
from imagenet_build.infra import storage
from imagenet_build.model import file_name
from imagenet_build.plan import SplitPlan
from imagenet_build.request import ConvertRequest
from imagenet_build.sources import SHOWN
from imagenet_build.writer.builds import Build
from imagenet_build.writer.inputs import Inputs


class ConvertSplitSummary(TypedDict):
    # the split's arrangement (folders, flat, tar, ...), under the key --json documents have always had
    layout: str
    images: int  # listed
    records: int  # written
    shards: int


class ConvertSummary(TypedDict, total=False):
    """convert's --json document: one build's, or a --resize run's (`resize`, and each build's under `builds`)."""

    ok: bool
    output_dir: str
    manifest: str  # a build's manifest.json
    shards_written: int
    shards_kept: int
    records: int
    bytes: int
    seconds: float
    images_per_second: Optional[float]
    splits: Dict[str, ConvertSplitSummary]
    skipped: List[Dict[str, Any]]  # {file, reason, split[, label]}
    reencoded: List[Dict[str, Any]]  # {file, reencoded, note, split}
    resized: int  # a resized build: its images decoded, resized and encoded (the rest stored as at full size)
    notes: List[str]
    resize: Dict[str, Any]  # a --resize run: its targets and options
    builds: Dict[str, "ConvertSummary"]  # a --resize run: each build's summary under its folder's name
    shards_read: int  # a --resize run: shards whose images were read, once for every build
    boxes: Dict[str, int]  # how the boxes matched the images
    found: str  # --from: what it found


class Timing:
    """How long a run took, and how many images it read: its images per second."""

    def __init__(self, seconds: float, images: int) -> None:
        self.seconds, self.images = seconds, images

    @property
    def rounded(self) -> float:
        return round(self.seconds, 3)

    @property
    def images_per_second(self) -> float | None:
        return round(self.images / self.seconds, 1) if self.seconds > 0 else None


def build_summary(build: Build, plans: list[SplitPlan], timing: Timing) -> ConvertSummary:
    """One build's summary: its files, figures, the images left out or re-encoded, the scans' notes."""
    shards = [build.done[name].entry for p in plans for name in p.names]
    figures = figures_of(shards)
    summary = ConvertSummary(
        ok=True,
        output_dir=str(build.dest.output),
        manifest=storage.join(build.dest.output, MANIFEST_NAME),
        shards_written=len(build.written),
        shards_kept=figures["shards"] - len(build.written),
        records=figures["records"],
        bytes=figures["bytes"],
        seconds=timing.rounded,
        images_per_second=timing.images_per_second,
        splits={},
        skipped=[dict(s, split=e["split"]) for e in shards for s in e["skipped"]],
        reencoded=[dict(r, split=e["split"]) for e in shards for r in e["reencoded"]],
        notes=[],
    )
    if build.resize is not None:
        summary["resized"] = resized_count(shards)
    for p in plans:
        s = p.input
        summary["splits"][p.split] = ConvertSplitSummary(
            layout=s.arrangement,
            images=len(s),
            records=figures_of(build.done[name].entry for name in p.names)["records"],
            shards=p.num_shards,
        )
        summary["notes"].extend(s.notes)
        if s.ignored:
            shown = ", ".join(s.ignored[:SHOWN])
            summary["notes"].append(
                f"{p.split}: {len(s.ignored)} file(s) ignored (not <synset>/*.JPEG as slim takes them): {shown}"
            )
        if s.empty_classes:
            summary["notes"].append(
                f"{p.split}: {len(s.empty_classes)} class(es) of the labels file have no images: "
                + ", ".join(s.empty_classes[:SHOWN])
            )
        summary["skipped"].extend({"file": f, "reason": r, "split": p.split} for f, r in s.left_out)
    return summary


def run_summary(request: ConvertRequest, builds: list[Build], plans: list[SplitPlan], inputs: Inputs,
                shards_read: int, timing: Timing) -> ConvertSummary:
    """The run's summary: the build's own (a --resize run: each build's under its folder's name), the copy's
    notes first, what --from found, how the boxes matched."""
    summaries = [build_summary(build, plans, timing) for build in builds]
    if request.resize is None:
        summary = summaries[0]
    else:
        resize = request.resize
        summary = ConvertSummary(
            ok=True,
            output_dir=str(request.dest.output),
            resize={"targets": [t.label for t in resize.targets], "quality": resize.quality,
                    "larger_only": resize.larger_only, "exif_transpose": resize.exif_transpose,
                    "filter": resize.filter},
            builds={build.folder: one for build, one in zip(builds, summaries)},
            shards_read=shards_read,
            seconds=timing.rounded,
            images_per_second=timing.images_per_second,
            notes=[],
        )
    summary["notes"][:0] = request.copy.notes + (inputs.spool.notes if inputs.spool is not None else [])
    if inputs.boxes:
        summary["boxes"] = box_figures(inputs)
    if request.from_paths:
        summary["found"] = found(request, inputs)
    return summary


def box_figures(inputs: Inputs) -> dict[str, int]:
    """How many images of the build got boxes, and how many box rows named no image of it."""
    rows = sum(len(packed) // BOX_BYTES for packed in inputs.boxes.values())
    images_with_boxes = matched_rows = 0
    for split_input in inputs.splits:
        for relpath in split_input.relpaths:
            packed = inputs.boxes.get(file_name(relpath))
            if packed:
                images_with_boxes += 1
                matched_rows += len(packed) // BOX_BYTES
    return {"rows": rows, "images_with_boxes": images_with_boxes, "rows_naming_no_image": rows - matched_rows}


def found(request: ConvertRequest, inputs: Inputs) -> str:
    """"<copy>: 1,281,167 train, 50,000 validation, 544,546 annotated": what --from found."""
    counts = [f"{len(s):,} {s.split}" for s in inputs.splits]
    if inputs.boxes:
        counts.append(f"{len(inputs.boxes):,} annotated")
    return f"{request.copy.description}: {', '.join(counts)}"
