"""The builds one convert writes: the full-size build in OUTPUT, or one per --resize target in OUTPUT/<target>/.

Each is complete on its own (its own indexes, manifest and resume): the same files as a run for
that target alone. Here: where each goes, the options its manifest records, what a previous run
left that it keeps, and its manifest from the shards done so far.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, cast

from imagenet_build.encode.resize import ResizeOptions
from imagenet_build.engines.job import remove_job_folder
from imagenet_build.format.build_figures import assemble, manifest_base, split_figures
from imagenet_build.format.destination import Destination
from imagenet_build.format.manifest import REAL_LABELS_OPTION, Manifest, SplitFigures, write_labels
from imagenet_build.infra.workers import Workers
from imagenet_build.plan import SplitPlan
from imagenet_build.request import ConvertRequest
from imagenet_build.writer.commit import commit
from imagenet_build.writer.dispatch import earlier_shards
from imagenet_build.writer.inputs import Inputs, describe
from imagenet_build.writer.output_folder import check_output_dir
from imagenet_build.writer.resume import read_previous, shards_to_keep
from imagenet_build.writer.shard_writer import ShardWriteResult


class Build:
    """One build being written: where it goes, its layout options, the shards it holds, its manifest."""

    def __init__(self, dest: Destination, options: dict[str, Any], resize: ResizeOptions | None) -> None:
        self.dest, self.options, self.resize = dest, options, resize  # resize: one target, or None
        self.done: dict[str, ShardWriteResult] = {}  # the shards it holds: kept from before, or written now
        self.written: list[str] = []  # the shards this run wrote
        self.base: Manifest = {}  # its manifest's format, options, inputs and classes

    @property
    def folder(self) -> str:
        """A resized build's folder under OUTPUT (shorter-256)."""
        assert self.resize is not None  # a resized run's builds each have their one target
        return self.resize.targets[0].folder

    def manifest(self, plans: list[SplitPlan], complete: bool) -> Manifest:
        """Its manifest from the shards done so far, in plan order."""
        done = [self.done[name] for p in plans for name in p.names if name in self.done]
        splits = {p.split: self._split_figures(p) for p in plans}
        return assemble(self.base, splits, [r.entry for r in done], complete,
                        {r.entry["name"]: r.input_state for r in done})

    def commit(self, plans: list[SplitPlan], complete: bool, ended: dict[str, str]) -> None:
        """Its manifest written (writer/commit.py: each entry held to its shard's facts first), with how the run
        ended where it stopped early."""
        manifest = cast(Manifest, dict(self.manifest(plans, complete), **ended))
        commit(self.dest.output, manifest, {name: result.facts for name, result in self.done.items()})

    def _split_figures(self, p: SplitPlan) -> SplitFigures:
        entries = [self.done[name].entry for name in p.names if name in self.done]
        counts = None
        if len(entries) == p.num_shards:  # the labels of what the shards hold
            counts = Counter(p.input.labels)
            counts.subtract(skip["label"] for e in entries for skip in e["skipped"])
        return split_figures(p.num_shards, entries, p.input.left_out, counts)


def destinations(request: ConvertRequest) -> list[Destination]:
    """Where each build goes: OUTPUT, or OUTPUT/<target>/ per resized target."""
    if request.resize is None:
        return [request.dest]
    return [request.dest.below(target.folder) for target in request.resize.targets]


def layout_options(request: ConvertRequest, index_label: str, splits: list[str], subset: str | None,
                   real_labels: str | None = None) -> dict[str, Any]:
    """The options that fix which files a build has; a rerun must repeat them to resume."""
    options = {
        "splits": sorted(splits),
        "train_shards": request.train_shards if "train" in splits else None,
        "validation_shards": request.validation_shards if "validation" in splits else None,
        "layout_threads": request.layout_threads,
        "index_dir": index_label,
        "classes_from_folders": request.classes_from is not None,
    }
    if subset:
        options["subset"] = subset  # only when given: manifests of builds without one stay as they were
    if real_labels:
        options[REAL_LABELS_OPTION] = real_labels  # the manifest's word that the validation records carry them
    return options


def make_builds(request: ConvertRequest, splits: list[str], subset: str | None, real_labels: str | None = None
                ) -> list[Build]:
    """The full-size build, or one build per resized target."""
    options = layout_options(request, request.dest.label_for_manifest(), splits, subset, real_labels)
    resize = request.resize
    if resize is None:
        return [Build(request.dest, options, None)]
    builds = []
    for target, sub in zip(resize.targets, destinations(request)):
        one = resize.only([target])
        builds.append(Build(sub, dict(options, index_dir=sub.label_for_manifest(), resize=one.recorded(target)), one))
    return builds


def ready_builds(request: ConvertRequest, pool: Workers, builds: list[Build], inputs: Inputs,
            plans: list[SplitPlan]) -> None:
    """Each build's output checked, what a previous run left read, the shards it may keep, its manifest's base."""
    names = {n for p in plans for n in p.names}
    previous = {}
    for build in builds:
        previous[build.dest] = read_previous(build.dest.output, request.overwrite, build.options)
        check_output_dir(build.dest, names, request.overwrite)
        if request.classes_from is not None:
            write_labels(build.dest.output, inputs.catalog.synsets)
    if inputs.spool is not None:
        inputs.spool.keep_listings()  # the output is checked: a rerun may plan from what it keeps
        if request.verify_inputs:  # every kept shard's inputs are read again
            inputs.spool.make_readable(pool, [p.split for p in plans])
    described = describe(request, inputs)
    if request.overwrite:
        remove_job_folder(request.dest.output)  # an earlier job's receipts vouch for nothing --overwrite keeps
    reported = earlier_shards(request.dest.output, [build.dest for build in builds])
    for build in builds:
        build.done = shards_to_keep(previous[build.dest], plans, build.dest, request.on_error, pool,
                                    request.verify_inputs, build.resize, reported[build.dest])
        build.base = manifest_base(build.options, described, inputs.catalog.synsets)
