"""convert's request: the options checked once into one frozen value, defaults and choices stated once, and the
per-split options a copy like one --from finds."""

import dataclasses
import os

import pytest

from conftest import run_cli
from imagenet_build.cli.group import cli
from imagenet_build.encode import resample
from imagenet_build.encode.resize import DEFAULT_QUALITY
from imagenet_build.engines import ENGINE_DEFAULTS
from imagenet_build.infra.errors import BuildError, UsageError
from imagenet_build.request import DEFAULTS, ON_ERROR, QUALITY, RESIZE_FILTERS, RUNNERS, ConvertOptions, convert_request
from imagenet_build.sources import scan_class_folders
from imagenet_build.sources.folders import scan_validation


def options(sample, out, **given):
    """The options of a small build of the sample, as the command line gives them."""
    small = {"train_dir": str(sample / "train"), "validation_dir": str(sample / "validation"),
             "labels_file": str(sample / "labels.txt"), "train_shards": 4, "validation_shards": 2, "layout_threads": 2}
    engine = {name: given.pop(name) for name in list(given) if name in ENGINE_DEFAULTS}  # each engine's own
    return ConvertOptions(output_dir=str(out), **dict(small, **given), engine_options=tuple(engine.items()))


def test_the_command_lines_defaults_and_choices_are_the_requests():
    """One home: what the command line gives convert for an option not given is ConvertOptions' default, and
    its choices are the request's Literals."""
    command = cli.commands["convert"]
    with command.make_context("convert", ["--output-dir", "out"]) as ctx:
        given = {name: value for name, value in ctx.params.items() if name != "as_json"}
    engine = {name: given.pop(name) for name in ENGINE_DEFAULTS}
    defaults = dataclasses.asdict(ConvertOptions(output_dir="out"))
    assert defaults.pop("engine_options") == () and given == defaults
    assert engine == ENGINE_DEFAULTS  # each engine's option's default, as the engine declares it
    params = {p.name: p for p in command.params}
    assert tuple(params["on_error"].type.choices) == ON_ERROR == ("fail", "skip")
    assert tuple(params["runner"].type.choices) == RUNNERS == ("local", "beam", "spark")
    assert tuple(params["resize_filter"].type.choices) == RESIZE_FILTERS == tuple(resample.FILTERS)
    assert RESIZE_FILTERS[0] == resample.DEFAULT_FILTER == "catmull-rom"
    assert DEFAULTS.on_error == ON_ERROR[0] and DEFAULTS.runner == RUNNERS[0]


def test_a_request_is_frozen_and_resolved(sample_dir, tmp_path):
    request = convert_request(options(sample_dir, tmp_path / "out"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.on_error = "skip"
    assert request.workers == (os.cpu_count() or 1)  # 0: one per core
    assert request.validation_labels_file.endswith("imagenet_2012_validation_synset_labels.txt")
    assert request.dest.index == str(tmp_path / "out" / "dali_idx")
    assert request.resize is None and request.from_paths == () and request.classes_from is None
    assert (request.shards("train"), request.shards("validation")) == (4, 2)
    resized = convert_request(options(sample_dir, tmp_path / "out", resize="shorter:96,160"))
    assert [t.label for t in resized.resize.targets] == ["shorter:96", "shorter:160"] and resized.resize.quality == 90
    assert resized.resize.filter == "catmull-rom"
    other = convert_request(options(sample_dir, tmp_path / "out", resize="shorter:96", resize_filter="lanczos3"))
    assert other.resize.filter == "lanczos3" and other.resize.only(other.resize.targets) == other.resize


@pytest.mark.parametrize("given,error,message", [
    ({"train_tar": "t.tar"}, UsageError, "give --train-dir or --train-tar, not both"),
    ({"bounding_box_file": "b.csv", "bbox_tar": "b.tar.gz"}, UsageError, "give --bounding-box-file or --bbox-tar"),
    ({"from_paths": ("x",)}, UsageError, "give --from or --train-dir, not both"),
    ({"train_dir": None, "validation_dir": None}, UsageError, "nothing to convert"),
    ({"on_error": "ignore"}, UsageError, "--on-error must be fail or skip, not 'ignore'"),
    ({"runner": "ray"}, UsageError, "--runner must be local or beam or spark, not 'ray'"),
    ({"beam_options": "--direct_num_workers 2"}, UsageError, "--beam-options goes with --runner beam"),
    ({"spark_master": "local[2]"}, UsageError, "--spark-master goes with --runner spark"),
    ({"spark_conf": ("a=b",)}, UsageError, "--spark-conf goes with --runner spark"),
    ({"shared_filesystem": True}, UsageError, "--shared-filesystem goes with --runner beam or spark"),
    ({"runner": "spark", "spark_conf": ("spark.executor.memory",)}, UsageError,
     "--spark-conf takes KEY=VALUE"),
    ({"runner": "beam", "beam_options": "--runner 'unclosed"}, UsageError, "--beam-options: No closing quotation"),
    ({"runner": "beam", "beam_options": "--runner NoSuchRunner"}, UsageError, "--runner NoSuchRunner"),
    ({"runner": "spark", "spark_master": "yarn"}, UsageError, "may run its workers on other machines: give an "
     "object-store URL"),
    ({"runner": "beam", "beam_options": "--runner PortableRunner --job_endpoint localhost:1"}, UsageError,
     "may run its workers on other machines"),
    ({"quality": 80}, UsageError, "--quality goes with --resize"),
    ({"exif_transpose": True}, UsageError, "--exif-transpose goes with --resize"),
    ({"resize_filter": "catmull-rom"}, UsageError, "--resize-filter goes with --resize"),
    ({"resize": "shorter:96", "resize_filter": "bicubic"}, UsageError,
     "--resize-filter must be catmull-rom or lanczos3, not 'bicubic'"),
    ({"resize": "shorter:96", "quality": 0}, UsageError, "--quality must be 1..100, not 0"),
    ({"resize": "wide:5"}, UsageError, "expected shorter:N or longer:N"),
    ({"train_shards": 3}, UsageError, "must be a multiple of --layout-threads"),
    ({"classes_from_folders": True, "train_tar": "t.tar", "train_dir": None}, UsageError,
     "--classes-from-folders takes its classes from --train-dir"),
    ({"index_dir": "s3://bucket/idx"}, UsageError, "must both be local or both be URLs"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_a_mistake_in_the_options_is_refused_in_one_line(sample_dir, tmp_path, given, error, message):
    with pytest.raises(error, match=message.replace("(", r"\(").replace(".", r"\.")):
        convert_request(options(sample_dir, tmp_path / "out", **given))
    assert not (tmp_path / "out").exists()


def test_an_output_among_the_inputs_is_refused(sample_dir, tmp_path):
    with pytest.raises(UsageError, match="--output-dir .* is inside --train-dir"):
        convert_request(options(sample_dir, sample_dir / "train" / "out"))
    (tmp_path / "file").write_text("x")
    with pytest.raises(BuildError, match="exists and is not a folder"):
        convert_request(options(sample_dir, tmp_path / "file"))


def test_classes_from_folders_with_from_is_one_line_not_a_traceback(sample_dir, tmp_path):
    """It was an AssertionError: the request had no folder to take the classes from."""
    result = run_cli("convert", "--from", sample_dir, "--classes-from-folders", "--output-dir", tmp_path / "out")
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().splitlines() == [
        "error: --classes-from-folders takes its classes from --train-dir (or --validation-dir): not with --from "
        "(see: imagenet-build convert --help)"]


def test_the_per_split_options_are_a_copy_like_one_from_finds(sample_dir, tmp_path):
    """One input path: the copy's scans are the ILSVRC2012 copy's, with the options' folders."""
    from imagenet_build.catalog.classes import load_catalog, read_validation_labels

    catalog = load_catalog(sample_dir / "labels.txt")
    request = convert_request(options(sample_dir, tmp_path / "out"))
    train = request.copy.scan_train(catalog, "fail", None)
    assert list(train.relpaths) == list(scan_class_folders("train", sample_dir / "train", catalog, "fail").relpaths)
    labels_file = sample_dir / "validation_labels.txt"
    validation = request.copy.scan_validation(catalog, "fail", None, lambda: read_validation_labels(labels_file),
                                              labels_file)
    expected = scan_validation(sample_dir / "validation", catalog, lambda: read_validation_labels(labels_file),
                               labels_file, "fail")
    assert (validation.arrangement, list(validation.relpaths)) == ("flat", list(expected.relpaths))
    only_train = convert_request(options(sample_dir, tmp_path / "out", validation_dir=None))
    assert only_train.copy.splits == ("train",) and not only_train.copy.carries_boxes


def test_classes_from_folders_takes_any_image_from_both_splits(sample_dir, tmp_path):
    from imagenet_build.catalog.classes import catalog_from_folders

    request = convert_request(ConvertOptions(output_dir=str(tmp_path / "out"), train_dir=str(sample_dir / "train"),
                                             validation_dir=str(sample_dir / "train"), classes_from_folders=True,
                                             train_shards=2, validation_shards=2, layout_threads=1))
    assert request.classes_from == str(sample_dir / "train")
    catalog = catalog_from_folders(request.classes_from)
    expected = scan_class_folders("train", sample_dir / "train", catalog, "fail", any_image=True)
    for scanned in (request.copy.scan_train(catalog, "fail", None),
                    request.copy.scan_validation(catalog, "fail", None, list, "")):
        assert list(scanned.relpaths) == list(expected.relpaths)  # the PNG named .JPEG and the rest, any suffix


def test_the_command_lines_quality_range_is_the_requests(sample_dir, tmp_path):
    """--quality's range is stated once: the command line refuses 0 in its words, and write_arrays in its own."""
    quality = {p.name: p for p in cli.commands["convert"].params}["quality"]
    assert (quality.type.min, quality.type.max) == QUALITY == (1, 100)
    assert quality.help.endswith(f"[default: {DEFAULT_QUALITY}]")  # as the request resolves it
    result = run_cli("convert", "--train-dir", sample_dir / "train", "--output-dir", tmp_path / "out",
                     "--resize", "shorter:96", "--quality", 0)
    assert result.exit_code == 2 and "--quality" in result.stderr and "1<=x<=100" in result.stderr
