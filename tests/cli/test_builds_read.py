"""Generated from the command line itself: every verb that reads a build (a PathOf of role reads-build, found by
walking the click tree) given the build with one of its files replaced by a FIFO, a null device, a zero device or a
link to /dev/zero. A FIFO would block the reader until someone writes to it, /dev/zero never ends: each is refused
before a byte is read, in one `error:` line (verify: in its report, naming the file) with exit 1, within BOUND
seconds, the node untouched."""

import json
import os
import shutil
from pathlib import Path

import pytest

from hostile_paths import NODES, argv, node_state, one_error_line, params_of, run_bounded

READS_BUILD = params_of("reads-build")
SHARD = "train-00000-of-00004"
# Every file of the build the cases replace: each kind of file a build holds, once
FILES = ["manifest.json", "features.json", "dataset_info.json", "labels.txt", SHARD, f"dali_idx/{SHARD}.idx",
         "verify.json", "trainer-check.json"]


def given(verb, build, tmp):
    """How each verb that reads a build is run besides its folder; a verb reading a build with no line here fails
    test_every_reader_is_given_a_command. verify runs twice: whole, and --quick."""
    return {
        "verify": [{"workers": 1}, {"workers": 1, "quick": True}],
        "report": [{"output": tmp / "page.html"}],
        "trainer-check": [{"framework": "torch", "steps": 1, "batch_size": 4, "workers": 0, "model": "small"}],
        "tfds": [{}],
    }[verb]


def test_every_reader_is_given_a_command(tmp_path):
    assert {verb for verb, _ in READS_BUILD} == {"verify", "report", "trainer-check", "tfds"}
    for verb, _ in READS_BUILD:
        assert given(verb, tmp_path, tmp_path), verb


@pytest.fixture(scope="module")
def pristine(converted, tmp_path_factory):
    """The converted sample with every kind of file a build holds: labels.txt, verify.json, trainer-check.json."""
    build = tmp_path_factory.mktemp("read") / "build"
    shutil.copytree(converted, build)
    synsets = json.loads((build / "manifest.json").read_text())["synsets"]
    (build / "labels.txt").write_text("".join(s + "\n" for s in synsets))
    (build / "verify.json").write_text(json.dumps({"ok": True, "problems": [], "warnings": []}))
    (build / "trainer-check.json").write_text(json.dumps({"ok": True, "checks": []}))
    return build


CASES = [(verb, k, name, kind) for verb, _ in READS_BUILD for k in range(len(given(verb, Path("b"), Path("t"))))
         for name in FILES for kind in NODES]


@pytest.mark.parametrize("verb, variant, name, kind", CASES,
                         ids=[f"{v}{'-quick' if k else ''} {n}: {kind}" for v, k, n, kind in CASES])
def test_no_verb_reads_what_is_no_file_of_a_build(pristine, tmp_path, verb, variant, name, kind):
    build = tmp_path / "build"
    shutil.copytree(pristine, build, symlinks=True)
    os.remove(build / name)
    NODES[kind](build / name)
    before = node_state(build / name)
    param = next(p for v, p in READS_BUILD if v == verb)
    code, stdout, stderr = run_bounded(argv(verb, given(verb, build, tmp_path)[variant], param, build))
    if verb == "verify":  # verify reports what is wrong with a build: the file is named in its report
        assert code == 1 and "Traceback" not in stderr, stderr
        assert f"{os.path.basename(name)}: not a regular file" in stdout or \
            f"{name}: not a regular file" in stdout, stdout[-3000:]
    else:
        line = one_error_line(code, stderr)
        assert os.path.basename(name) in line, line
    assert node_state(build / name) == before
