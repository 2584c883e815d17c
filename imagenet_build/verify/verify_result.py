"""verify's result: the JSON document (`--json`) and the report text, for every registered check."""

from __future__ import annotations

from typing import Dict, List, Optional, TypedDict

from imagenet_build.format.naming import MANIFEST_NAME
from imagenet_build.infra import read_door, storage
from imagenet_build.verify.check import REGISTRY, Check, registered
from imagenet_build.verify.folder import Folder
from imagenet_build.verify.problems import Problem, Problems


class VerifySplitSummary(TypedDict):
    shards: int
    records: int


class VerifySummary(TypedDict):
    checks: List[str]  # the checks this run made, in report order
    folder: str
    index_dir: str
    mode: str  # "quick", "full" or "deep"
    shards: int
    records: int
    splits: Dict[str, VerifySplitSummary]
    bytes: int
    manifest: bool
    manifest_sha256: Optional[str]  # the manifest judged: what `report` compares verify.json with
    problem_counts: Dict[str, int]  # by check: every problem, shown or not
    warning_counts: Dict[str, int]
    notes: List[str]  # what was not checked, and why
    seconds: float
    records_per_second: Optional[float]
    mb_per_second: Optional[float]


class VerifyResult(TypedDict):
    """verify's result and its --json document. `ok` is no problem at all; warnings never change it."""

    ok: bool
    problems: List[Problem]  # the first 20 of each check
    warnings: List[Problem]
    summary: VerifySummary


def verify_result(folder: Folder, checks: list[type[Check]], problems: Problems, warnings: Problems,
                  seconds: float) -> VerifyResult:
    """The document of one run, from the folder the checks saw and what they found."""
    split_records = folder.split_records()
    records = sum(split_records.values())
    total_bytes = sum(r.bytes for r in folder.results.values())
    quick, deep = folder.mode.quick, folder.mode.deep
    summary: VerifySummary = {
        "checks": [check.name for check in checks if not check.warning],
        "folder": str(folder.root),
        "index_dir": str(folder.index_dir),
        "mode": "quick" if quick else ("deep" if deep else "full"),
        "shards": len(folder.results),
        "records": records,
        "splits": {split: {"shards": len(folder.by_split[split]), "records": n} for split, n in split_records.items()},
        "bytes": total_bytes,
        "manifest": folder.manifest is not None,
        "manifest_sha256": read_door.sha256(storage.join(folder.root, MANIFEST_NAME)) if folder.manifest else None,
        "problem_counts": dict(sorted(problems.counts.items())),
        "warning_counts": dict(sorted(warnings.counts.items())),
        "notes": folder.notes,
        "seconds": round(seconds, 3),
        "records_per_second": round(records / seconds, 1) if seconds else None,
        "mb_per_second": round(total_bytes / 1e6 / seconds, 1) if seconds else None,
    }
    # warnings never change `ok` (nor the exit code): the build is sound, but readers may disagree
    return {"ok": not problems.counts, "problems": problems.shown, "warnings": warnings.shown, "summary": summary}


def format_report(result: VerifyResult) -> list[str]:
    """The report as text lines: a row per check with its problems, then the warnings and the notes."""
    s = result["summary"]
    lines = [
        f"{s['folder']}: {s['shards']} shards, {s['records']} records, {s['bytes'] / 1e6:.1f} MB "
        f"({s['mode']} check, {s['seconds']:.1f} s, {s['mb_per_second']} MB/s)"
    ]
    for split, figures in s["splits"].items():
        lines.append(f"  {split}: {figures['records']} records in {figures['shards']} shards")
    by_check = _by_check(result["problems"])
    width = max([10] + [len(check.name) for check in registered() if not check.warning])  # one column of names
    for check in (check for check in registered() if not check.warning):
        count = s["problem_counts"].get(check.name, 0)
        status = f"{count} problem(s)" if count else ("ok" if check.name in s["checks"] else "not run")
        lines.append(f"{check.name:{width}s} {status:16s} {check.covers}")
        shown = by_check.get(check.name, [])
        lines.extend(f"    {_where(p)}: {p['message']}" for p in shown)
        if count > len(shown):
            lines.append(f"    ... and {count - len(shown)} more")
    by_warning = _by_check(result.get("warnings", []))
    for name, count in s.get("warning_counts", {}).items():
        warned = REGISTRY.get(name)
        lines.append(f"warning: {name}: {count} {warned.counted if warned else 'record(s)'}: "
                     f"{warned.covers if warned else ''}")
        shown = by_warning.get(name, [])
        lines.extend(f"    {_where(w)}: {w['message']}" for w in shown)
        if count > len(shown):
            lines.append(f"    ... and {count - len(shown)} more")
    lines.extend(f"note: {note}" for note in s["notes"])
    lines.append("OK: sound" if result["ok"] else f"FAILED: {sum(s['problem_counts'].values())} problem(s)")
    return lines


def _by_check(problems: List[Problem]) -> dict[str, list[Problem]]:
    found: dict[str, list[Problem]] = {}
    for problem in problems:
        found.setdefault(problem["check"], []).append(problem)
    return found


def _where(p: Problem) -> str:
    """Where a problem is, in words: the file, its record (or for an index, its line) and byte."""
    line_or_record = "line" if p["check"] == "index" else "record"
    return ", ".join(part for part in (
        p["file"],
        f"{line_or_record} {p['record']}" if p["record"] is not None else None,
        f"byte {p['offset']}" if p["offset"] is not None else None,
    ) if part)
