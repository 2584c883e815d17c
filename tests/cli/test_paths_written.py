"""Generated from the command line itself: every option or argument that names a file or a folder to write (a
PathOf of role writes-file or writes-folder, found by walking the click tree, so a new one is tried without being
listed here) given each place no verb may write: a device, a FIFO, a link (to a build's file, or elsewhere), a
complete build, a file or a new name inside it, its index folder, the verb's own input, a build's prefix on an
object store. Each ends in one `error:` line, exit 1 or 2, within BOUND seconds, the place untouched."""

import shutil
from pathlib import Path

import pytest

from hostile_paths import NODES, argv, node_state, one_error_line, params_of, path_params, run_bounded
from imagenet_build.cli.group import PathOf

WRITES_FILE = params_of("writes-file")
WRITES_FOLDER = params_of("writes-folder")
SHARD = "train-00000-of-00004"


def test_every_path_of_the_command_line_says_what_the_verb_does_there():
    """A path option is a PathOf with its role: one added as a plain click.Path (or a string) fails here, so no path
    to write escapes the cases below."""
    plain = [f"{verb} {param.name}" for verb, param in path_params() if not isinstance(param.type, PathOf)]
    assert plain == []
    assert {verb for verb, _ in WRITES_FILE} == {"bboxes", "report", "trainer-check"}
    assert {verb for verb, _ in WRITES_FOLDER} == {"convert", "index", "prepare-val", "sample"}


# Every parameter that takes text, and what it is: none names a file or a folder. A new one fails the test below until
# it is named here, or made a PathOf
TEXT = {
    ("convert", "beam_options"): "Beam's pipeline options", ("convert", "spark_master"): "a Spark master URL",
    ("convert", "spark_conf"): "KEY=VALUE", ("convert", "resize"): "sizes: shorter:256,...",
    ("report", "classes"): "a count or all", ("trainer-check", "split"): "a split's name",
    ("trainer-check", "mean"): "three numbers", ("trainer-check", "std"): "three numbers",
}


def test_every_parameter_that_takes_text_is_known_to_name_no_path():
    import click

    from imagenet_build.cli import cli

    top = click.Context(cli, info_name="imagenet-build")
    found = {(verb, param.name) for verb, command in cli.commands.items()
             for param in command.get_params(click.Context(command, info_name=verb, parent=top))
             if isinstance(param.type, click.types.StringParamType) and not getattr(param, "is_flag", False)}
    assert found == set(TEXT)


@pytest.fixture(scope="module")
def setting(converted, sample_dir, s3_server, tmp_path_factory):
    """A complete build (and another, whose shard `index` indexes), the sample and box XML as inputs, all private
    copies; the build uploaded to a bucket of the test server as s3://<bucket>/complete."""
    import boto3
    import fsspec

    t = tmp_path_factory.mktemp("written")
    shutil.copytree(converted, t / "build")
    shutil.copytree(converted, t / "other")
    shutil.copytree(sample_dir, t / "sample")
    xml = t / "xml" / "n01440764"
    xml.mkdir(parents=True)
    (xml / "n01440764_1.xml").write_text(
        "<annotation><size><width>10</width><height>10</height></size><object><name>n01440764</name><bndbox>"
        "<xmin>1</xmin><ymin>1</ymin><xmax>5</xmax><ymax>5</ymax></bndbox></object></annotation>")
    (t / "elsewhere.txt").write_text("a file elsewhere")
    boto3.client("s3").create_bucket(Bucket="written-paths")
    fs, _ = fsspec.core.url_to_fs("s3://written-paths")
    fs.put(str(t / "build"), "written-paths/complete", recursive=True)
    return t


def given(verb, t):
    """What each verb writing a path is given besides it: valid, so that only the place under test is wrong. A
    verb that writes a path and has no line here fails test_every_writer_is_given_a_command."""
    s = t / "sample"
    return {
        "convert": {"train_dir": s / "train", "validation_dir": s / "validation", "labels_file": s / "labels.txt",
                    "validation_labels_file": s / "validation_labels.txt", "output_dir": t / "new-build",
                    "train_shards": 2, "validation_shards": 1, "layout_threads": 1, "workers": 1},
        "index": {"inputs": t / "other" / SHARD, "index_dir": t / "new-indexes", "workers": 1},
        "report": {"folder": t / "build", "output": t / "page.html"},
        "bboxes": {"source": t / "xml", "output": t / "boxes.csv"},
        "trainer-check": {"folder": t / "build", "framework": "torch", "show": t / "batches.png"},
        "sample": {"out": t / "new-sample", "classes": 1, "per_class": 1, "validation_per_class": 1},
        "prepare-val": {"val_dir": t / "new-val"},
    }[verb]


def its_input(verb, t):
    """The first path the verb reads, from the tree: where it must never write (None: it reads none)."""
    reads = [p for v, p in path_params() if v == verb and p.type.role in ("reads", "reads-build")]
    values = given(verb, t)
    return next((values[p.name] for p in reads if p.name in values), None)


def _places(verb):
    """The places a verb's path is tried at: all, but its input where it reads none (sample)."""
    return [place for place in PLACES if place != "the verb's input" or its_input(verb, Path("t")) is not None]


def _node(kind):
    def make(t, folder):
        path = t / f"node-{kind.replace(' ', '-').replace('/', '')}"
        if not path.exists() and not path.is_symlink():
            NODES[kind](path)
        return path
    return make


def _link(t, to, name):
    path = t / name
    if not path.is_symlink():
        path.symlink_to(to)
    return path


def _input(t, folder, verb):
    where = its_input(verb, t)
    if folder:
        return where.parent if where.is_file() else where
    return where if where.is_file() else next(p for p in sorted(where.rglob("*")) if p.is_file())


# Every place no verb may write: (setting, a folder is asked for, the verb) -> the path given
PLACES = {
    "a FIFO": lambda t, folder, verb: _node("a FIFO")(t, folder),
    "a character device": lambda t, folder, verb: _node("a null device")(t, folder),
    "a link to a build's file": lambda t, folder, verb: _link(t, t / "build" / ("dali_idx" if folder else
                                                                                 "manifest.json"), "to-build"),
    "a link elsewhere": lambda t, folder, verb: _link(t, t / "elsewhere.txt", "to-elsewhere"),
    "the complete build": lambda t, folder, verb: t / "build" / ("" if folder else "manifest.json"),
    "a new name in the build": lambda t, folder, verb: t / "build" / ("sub" if folder else "notes.txt"),
    "its index folder": lambda t, folder, verb: t / "build" / "dali_idx" / ("" if folder else "notes.txt"),
    "through its index folder": lambda t, folder, verb: t / "build" / "dali_idx" / ".." / ("sub" if folder else
                                                                                         "notes.txt"),
    "the verb's input": lambda t, folder, verb: _input(t, folder, verb),
    "a build's prefix on S3": lambda t, folder, verb: "s3://written-paths/complete/dali_idx" + ("" if folder else
                                                                                                "/x.html"),
}
CASES = [(verb, param.name, place) for verb, param in WRITES_FILE + WRITES_FOLDER for place in _places(verb)]


def test_every_writer_is_given_a_command(tmp_path):
    for verb, _ in WRITES_FILE + WRITES_FOLDER:
        assert given(verb, tmp_path), verb


def _state(t, target):
    if str(target).startswith("s3://"):
        import fsspec

        fs, _ = fsspec.core.url_to_fs("s3://written-paths")
        return sorted(fs.find("written-paths/complete", detail=True).items(), key=lambda kv: kv[0])
    return [node_state(target), node_state(t / "build"), node_state(t / "sample"), node_state(t / "elsewhere.txt")]


@pytest.mark.parametrize("verb, name, place", CASES, ids=[f"{v} {n}: {p}" for v, n, p in CASES])
def test_no_path_to_write_lands_where_it_must_not(setting, verb, name, place):
    param = next(p for v, p in WRITES_FILE + WRITES_FOLDER if v == verb and p.name == name)
    target = PLACES[place](setting, param.type.role == "writes-folder", verb)
    before = _state(setting, target)
    code, _, stderr = run_bounded(argv(verb, given(verb, setting), param, target))
    one_error_line(code, stderr)
    assert _state(setting, target) == before
