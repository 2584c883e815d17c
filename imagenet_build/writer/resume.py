"""Resume: which shards of a previous run in the output this run may keep as they are.

manifest.json is the commit point: a shard counts only when it lists it. A listed
shard is kept when its bytes and its index's still match their sha256 and every
figure of its entry its files (writer/commit.py), its fingerprint matches this
plan, and its inputs are as they were (see ShardSpec).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from imagenet_build.encode.resample import UNRECORDED_FILTER
from imagenet_build.encode.resize import ResizeOptions
from imagenet_build.format.destination import Destination
from imagenet_build.format.manifest import REAL_LABELS_OPTION, SHARD_INPUTS, Manifest, read_manifest
from imagenet_build.format.naming import index_name
from imagenet_build.infra import storage
from imagenet_build.infra.errors import BuildError
from imagenet_build.infra.workers import Workers
from imagenet_build.model import ShardSpec
from imagenet_build.plan import SplitPlan
from imagenet_build.request import OnError
from imagenet_build.sources import input_identities
from imagenet_build.writer.commit import ShardFacts, kept_problem, read_facts
from imagenet_build.writer.shard_writer import ShardWriteResult, codec_of, rebuilt_sha256, variant_of


class ResumeCheck(NamedTuple):
    """One worker task: may the previous run's shard be kept?"""

    spec: ShardSpec
    candidates: tuple[ShardWriteResult, ...]  # earlier runs' word on the shard: the manifest's entry, a receipt
    dest: Destination
    on_error: OnError
    verify_inputs: bool
    resize: ResizeOptions | None = None  # a resized build's one target and options


def read_previous(output: str, overwrite: bool, options: dict[str, Any]) -> Manifest | None:
    """The manifest of an earlier run in the output that this run may resume, or None."""
    if overwrite:
        return None
    try:
        previous = read_manifest(output)
    except ValueError as e:
        raise BuildError(f"{e}; use --overwrite to start over") from None
    if previous and _compared(previous.get("options")) != _compared(options):
        changes = "; ".join(option_changes(previous.get("options") or {}, options))
        raise BuildError(f"{output}: holds a build made with other options ({changes}); "
                         "use --overwrite to replace it, or another --output-dir")
    return previous


def _compared(options: Any) -> Any:
    """Options as a rerun compares them: --real-labels by its content (`<file> sha256:<hex>`: its sha256), so the
    same real.json under another name or path resumes the build."""
    if not isinstance(options, dict) or not isinstance(options.get(REAL_LABELS_OPTION), str):
        return options
    return {**options, REAL_LABELS_OPTION: options[REAL_LABELS_OPTION].rpartition(" sha256:")[2]}


# how a manifest's options.<key> (or options.resize.<key>) is given on the command line; a flag's value is
# shown as given / not given (larger_only the other way round: --resize-all)
_OPTION_NAMES = {
    "splits": "splits built", "train_shards": "--train-shards", "validation_shards": "--validation-shards",
    "layout_threads": "--layout-threads", "index_dir": "--index-dir", "classes_from_folders": "--classes-from-folders",
    "subset": "--subset", "real_labels": "--real-labels",
    "resize": "--resize", "resize.target": "--resize", "resize.quality": "--quality",
    "resize.larger_only": "--resize-all", "resize.exif_transpose": "--exif-transpose",
    "resize.filter": "--resize-filter",
}


def _shown(key: str, value: Any) -> str:
    if key == "resize.filter" and value is None:  # not recorded: Lanczos3 (encode.resize.ResizeOptions.recorded)
        value = UNRECORDED_FILTER
    if key == "resize.larger_only" and isinstance(value, bool):
        value = not value
    if isinstance(value, bool):
        return "given" if value else "not given"
    if value is None:
        return "none"
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "none"
    return str(value)


def option_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Each option a rerun changed, as `--train-shards 4 before, 8 now`: what the user typed, not a dict."""
    def flat(options: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in options.items() if not (k == "resize" and isinstance(v, dict))}
        if isinstance(options.get("resize"), dict):
            out.update({f"resize.{k}": v for k, v in options["resize"].items()})
        return out

    before, now = flat(old), flat(new)
    changes = []
    for key in sorted(set(before) | set(now), key=lambda k: (list(_OPTION_NAMES).index(k) if k in _OPTION_NAMES
                                                              else len(_OPTION_NAMES), k)):
        if before.get(key) != now.get(key):
            changes.append(f"{_OPTION_NAMES.get(key, key)}: {_shown(key, before.get(key))} before, "
                           f"{_shown(key, now.get(key))} now")
    return changes


def shards_to_keep(
    previous: Manifest | None,
    plans: Sequence[SplitPlan],
    dest: Destination,
    on_error: OnError,
    pool: Workers,
    verify_inputs: bool,
    resize: ResizeOptions | None = None,
    reported: Sequence[ShardWriteResult] = (),
) -> dict[str, ShardWriteResult]:
    """{name: its entry and its inputs' state now} of the earlier runs' shards that this plan would write identically.

    What earlier runs said of a shard: its entry in the previous manifest, and the receipts (`reported`) of a job
    that failed or was killed before its manifest listed them. A shard is kept when one of those matches: its
    sha256 and its index's still match the files, its fingerprint matches this plan, and its inputs are as they
    were (a file's size and mtime, an archive member's place: sources.MemberReader.identity); with verify_inputs, its
    inputs are also read and the shard rebuilt in memory to the same sha256 (then a touched but unchanged input
    does not count as changed).
    """
    states = (previous or {}).get("inputs", {}).get(SHARD_INPUTS, {})
    said: dict[str, list[ShardWriteResult]] = {}
    for entry in (previous or {}).get("shards", []):
        said.setdefault(entry["name"], []).append(ShardWriteResult(entry, states.get(entry["name"])))
    for result in reported:
        if result not in said.get(result.entry["name"], []):
            said.setdefault(result.entry["name"], []).append(result)
    tasks = [ResumeCheck(p.spec(k), tuple(said[name]), dest, on_error, verify_inputs, resize)
             for p in plans for k, name in enumerate(p.names) if name in said]
    kept: dict[str, ShardWriteResult] = {}

    def keep(task: ResumeCheck, result: ShardWriteResult | None) -> None:
        if result is not None:
            kept[task.spec.name] = result

    pool.run(still_matches, tasks, keep)
    return kept


def still_matches(
    spec: ShardSpec,
    candidates: Sequence[ShardWriteResult],
    dest: Destination,
    on_error: OnError,
    verify_inputs: bool,
    resize: ResizeOptions | None = None,
) -> ShardWriteResult | None:
    """The first of `candidates` (what earlier runs said of the shard) that the shard and index in the folder still
    match (writer/commit.py's kept_problem: every figure, the sha256s, the plan's images), with the shard's input
    state now and its files' facts; None when none does. The files are read once, whatever the count."""
    state = None
    facts: list[ShardFacts | None] = []  # read at the first candidate that needs them
    for entry, previous_state, _ in candidates:
        codec = codec_of(entry["reencoded"], entry.get("resized", 0), resize)
        if spec.fingerprint(on_error, codec, variant_of(resize)) != entry.get("fingerprint"):
            continue
        state = state or spec.input_state(input_identities(spec))
        if not verify_inputs and state != previous_state:
            continue
        if not facts:
            facts.append(read_facts(storage.join(dest.output, spec.name),
                                    storage.join(dest.index, index_name(spec.name))))
        if kept_problem(entry, facts[0], spec):
            continue
        if verify_inputs and rebuilt_sha256(spec, on_error, resize) != entry["sha256"]:
            continue
        return ShardWriteResult(entry, state, facts[0])
    return None
