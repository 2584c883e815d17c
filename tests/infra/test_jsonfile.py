"""Every JSON file the tool reads — the manifest, --real-labels' real.json, verify.json, trainer-check.json — through
infra/jsonfile.py: generated wrong shapes (hypothesis: each valid document with one part replaced or removed, and
bytes that are no JSON at all) and deep nesting give one line naming the file, or a page with a one-line note;
never a traceback."""

import copy
import json
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import run_cli
from helpers import expect_error
from imagenet_build.format.manifest import dumps
from imagenet_build.infra.errors import BuildError
from imagenet_build.infra.jsonfile import MAX_DEPTH, JsonError, depth, parse_json, read_json, shape_problem

SCALARS = (st.none() | st.booleans() | st.integers(-(2 ** 70), 2 ** 70) | st.floats(allow_nan=False)
           | st.text(max_size=6))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                                          max_size=3), max_leaves=8)
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True,
                    database=None)  # the same examples every run, none kept between runs


@st.composite
def wrong_shapes(draw, document):
    """`document` with one part, at any depth, replaced by any JSON value or removed; or any JSON value at all."""
    if draw(st.integers(0, 9)) == 0:
        return draw(VALUES)
    path, node = [], document
    while isinstance(node, (dict, list)) and node and (not path or draw(st.integers(0, 5))):
        key = draw(st.sampled_from(sorted(node) if isinstance(node, dict) else range(len(node))))
        path.append(key)
        node = node[key]
    if not path:
        return draw(VALUES)
    changed = parent = copy.copy(document)  # the containers on the path copied, the rest shared: not the whole
    for key in path[:-1]:  # 50,000 entries of a real.json for each example
        parent[key] = copy.copy(parent[key])
        parent = parent[key]
    if isinstance(parent, dict) and draw(st.booleans()):
        del parent[path[-1]]
    else:
        parent[path[-1]] = draw(VALUES)
    return changed


def restore(folder, name, valid):
    if name not in RESTORED:  # written after every example: real.json's 50,000 entries dumped once
        RESTORED[name] = dumps(valid[name])
    (folder / name).write_bytes(RESTORED[name])


RESTORED: dict = {}


def one_line(error, path):
    message = str(error)
    assert "\n" not in message and str(path) in message, message
    return message


# ------------------------------------------------------------------ the readers, each on its valid document


@pytest.fixture(scope="module")
def documents(converted, tmp_path_factory):
    """A build to read each document beside, and each document as the tool writes it."""
    folder = tmp_path_factory.mktemp("json") / "build"
    shutil.copytree(converted, folder)
    verify = json.loads(run_cli("verify", converted, "--json", "--workers", 1).stdout)
    verify["problems"] = [{"check": "crc", "file": "train-00000-of-00004", "record": 1, "offset": 0,
                           "message": "payload CRC mismatch"}]
    trainer = {"ok": False, "checks": [{"name": "epoch", "ok": True, "detail": "every record once"},
                                       {"name": "overfit", "ok": False, "detail": "did not halve"}],
               "framework": "torch", "device": "cpu", "model": "small", "split": "train", "steps": 3,
               "batch_size": 4, "show": "trainer-check.png"}
    from PIL import Image
    from PIL.PngImagePlugin import PngInfo

    info = PngInfo()
    info.add_text("imagenet-build", "{}")
    Image.new("RGB", (4, 4)).save(folder / "trainer-check.png", pnginfo=info)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert (folder / "manifest.json").read_bytes() == dumps(manifest)  # so a rewrite is the same bytes
    return folder, {"manifest.json": manifest, "verify.json": verify, "trainer-check.json": trainer,
                    "real.json": [[k % 1000] for k in range(50_000)]}


def read_manifest_as_every_verb_does(folder):
    """The manifest as read_manifest gives it, then what the verbs take from it beyond its schema."""
    from imagenet_build.format.manifest import read_manifest
    from imagenet_build.report import figures
    from imagenet_build.report.report_run import expected_labels
    from imagenet_build.verify.folder_checks import _check_manifest_figures

    try:
        manifest = read_manifest(folder)
    except ValueError as e:
        return one_line(e, folder / "manifest.json")
    figures.split_rows(manifest, {})
    figures.label_counts(manifest)
    figures.inputs_listed(manifest, "reencoded")
    figures.inputs_listed(manifest, "skipped")
    json.dumps(figures.options_shown(manifest))
    expected_labels(manifest["synsets"])
    list(_check_manifest_figures(manifest))
    return ""


def read_real_json(folder):
    from imagenet_build.catalog.real_labels import read_real_json as read

    try:
        read(folder / "real.json")
    except BuildError as e:
        return one_line(e, folder / "real.json")
    return ""


def page_of(folder):
    """What report makes of verify.json and trainer-check.json: their section of the page, notes in one line."""
    from imagenet_build.format.build_folder import BuildFolder
    from imagenet_build.report import figures, page
    from imagenet_build.report.records import Shards
    from imagenet_build.report.report_run import _verify_tiles, _where

    verify = figures.verify_found(str(folder))
    trainer, picture = figures.trainer_found(str(folder))
    build = BuildFolder.open(folder)
    shards = Shards(build, list(build.manifest["splits"]))
    tiles = _verify_tiles(shards, verify.document, {})
    lines = [_where(str(folder), p) for p in (verify.document or {}).get("problems", [])]
    page.build_section(page.BuildView(
        title="t", complete=True, rows=[], num_classes=4, reencoded=(0, []), skipped=(0, []), boxes=(0, 0, 0),
        options={}, verify=verify, verify_tiles=tiles, trainer=trainer, trainer_picture=picture, charts=[],
        sheets=[], problems=lines, notes=[]))
    for note in verify.notes + trainer.notes:
        assert "\n" not in note and str(folder) in note, note
    return " ".join(verify.notes + trainer.notes)


READERS = {  # each JSON file the tool reads, and the reading as the tool does it
    "manifest.json": read_manifest_as_every_verb_does,
    "real.json": read_real_json,
    "verify.json": page_of,
    "trainer-check.json": page_of,
}


@pytest.mark.parametrize("name", list(READERS))
def test_each_documents_valid_form_is_read(documents, name):
    folder, valid = documents
    restore(folder, name, valid)
    try:
        assert READERS[name](folder) == ""
    finally:
        restore(folder, name, valid)


@pytest.mark.parametrize("name", list(READERS))
def test_a_wrong_shape_is_one_line_never_a_traceback(documents, name):
    folder, valid = documents

    @SETTINGS
    @given(st.data())
    def check(data):
        document = data.draw(wrong_shapes(valid[name]))
        (folder / name).write_text(json.dumps(document))
        READERS[name](folder)  # raises nothing but what one_line asserts

    try:
        check()
    finally:
        restore(folder, name, valid)


@pytest.mark.parametrize("where", [("shards", 0, "reencoded"), ("shards", 0, "skipped"),
                                   ("splits", "train", "left_out")])
def test_a_manifests_lists_of_entries_hold_objects(documents, where):
    folder, valid = documents
    manifest = copy.deepcopy(valid["manifest.json"])
    *path, key = where
    entry = manifest
    for part in path:
        entry = entry[part]
    entry[key] = [1]
    (folder / "manifest.json").write_text(json.dumps(manifest))
    try:
        assert READERS["manifest.json"](folder).endswith(f"{key}[0]: 1 is not an object")
    finally:
        restore(folder, "manifest.json", valid)


@pytest.mark.parametrize("name", list(READERS))
@SETTINGS
@given(data=st.binary(max_size=64) | st.sampled_from([b"[" * 100_000, b'{"a":' * 100_000, b"[" * 65 + b"]" * 65,
                                                       b"\xff\xfe", b"", b"1" * 5000, b"NaN"]))
def test_bytes_that_are_no_json_or_nest_too_deep_are_one_line(documents, name, data):
    folder, valid = documents
    (folder / name).write_bytes(data)
    try:
        READERS[name](folder)
    finally:
        restore(folder, name, valid)


# ------------------------------------------------------------------ the door itself


def test_nesting_is_bounded_however_it_is_written():
    assert depth([]) == 1 and depth(1) == 0 and depth({"a": [{"b": []}]}) == 4
    parse_json("[" * MAX_DEPTH + "]" * MAX_DEPTH, "ok.json")
    for text in ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "[" * 100_000, '{"a":' * 2000 + "1" + "}" * 2000):
        with pytest.raises(JsonError, match=f"^deep.json: .*nested deeper than {MAX_DEPTH} levels$"):
            parse_json(text, "deep.json")


def test_a_lone_surrogate_is_no_text_wherever_it_is():
    lone = 'a string holding a lone surrogate ("{}"), which is no Unicode text'
    for text, held in ((r'{"synsets": ["\ud800"]}', "\\ud800"), (r'{"x\udfffy": 1}', "x\\udfffy"),
                       (r'[[{"a": "\uDBFF"}]]', "\\udbff"), ('"raw \ud800"', "raw \\ud800")):
        with pytest.raises(JsonError) as refused:
            parse_json(text, "m.json")
        assert str(refused.value) == "m.json: " + lone.format(held), text
    assert parse_json(r'["\ud83d\ude00", "\\ud800"]', "ok.json") == ["\U0001f600", "\\ud800"]  # a pair; a backslash
    assert parse_json(b'"\\\\ud800 \xf0\x9f\x98\x80"', "ok.json") == "\\ud800 \U0001f600"  # UTF-8 bytes


def test_a_path_that_is_no_regular_file_is_refused_without_reading_it(tmp_path):
    import os

    os.mkfifo(tmp_path / "fifo.json")  # reading it would wait forever
    for path, kind in ((tmp_path / "fifo.json", "a FIFO"), ("/dev/zero", "a character device"), (tmp_path, "a folder")):
        with pytest.raises(JsonError, match=f"not a regular file \\({kind}\\)"):
            read_json(path)
    big = tmp_path / "big.json"
    big.write_bytes(b"[" + b"0," * 100 + b"0]")
    with pytest.raises(JsonError, match="larger than 100 bytes"):
        read_json(big, limit=100)
    with pytest.raises(FileNotFoundError):
        read_json(tmp_path / "missing.json")


def test_shapes_name_the_field_and_what_it_should_be():
    from typing import Dict, List, Literal, Optional, TypedDict

    class Line(TypedDict):
        name: str

    class Document(Line, total=False):
        items: List[int]
        counts: Dict[str, float]
        where: Optional[str]
        mode: Literal["quick", "full"]

    assert shape_problem({"name": "a", "items": [1], "counts": {"x": 1}, "where": None, "mode": "full"}, Document) == ""
    assert shape_problem({}, Document) == "name: missing"
    assert shape_problem({"name": "a", "items": [1, True]}, Document) == "items[1]: true is not a whole number"
    assert shape_problem({"name": "a", "counts": {"x": "1"}}, Document) == 'counts.x: "1" is not a number'
    assert shape_problem({"name": "a", "where": 5}, Document) == "where: 5 is not a string or null"
    assert shape_problem({"name": "a", "mode": "deep"}, Document) == 'mode: "deep" is not "quick" or "full"'
    assert shape_problem(["a"], Document) == '["a"] is not an object'
    assert shape_problem(5, Optional[Line]) == "5 is not an object or null"
    assert shape_problem("a" * 50, int) == '"' + "a" * 36 + '... is not a whole number'  # cut at 40 characters
    assert shape_problem("a" * 38, int) == '"' + "a" * 38 + '" is not a whole number'  # 40: shown whole
    assert shape_problem(1, bytes) == "1 is not <class 'bytes'>"  # a shape without a name: Python's word for it


def test_bytes_that_are_no_json_say_what_the_parser_found():
    with pytest.raises(JsonError) as raised:
        parse_json(b"{", "f.json")
    assert str(raised.value) == ("f.json: not valid JSON (Expecting property name enclosed in double quotes: "
                                 "line 1 column 2 (char 1))")
    with pytest.raises(JsonError) as raised:
        parse_json(b'"\xff"', "f.json")
    assert str(raised.value) == "f.json: not UTF-8 text"


# ------------------------------------------------------------------ through the verbs


DEEP = "[" * 100_000


@pytest.mark.parametrize("verb", [["verify"], ["report"], ["trainer-check", "--framework", "torch"]])
def test_a_deeply_nested_manifest_is_one_line_for_every_verb_that_reads_it(build, verb):
    (build / "manifest.json").write_text(DEEP)
    if verb == ["verify"]:  # verify reports it as the manifest's problem, and checks the shards structurally
        result = run_cli("verify", build, "--json", "--workers", 1)
        assert result.exit_code == 1 and "Traceback" not in result.output
        assert [p["message"] for p in json.loads(result.stdout)["problems"]] == [
            f"{build / 'manifest.json'}: nested deeper than {MAX_DEPTH} levels"]
        return
    expect_error([*verb[:1], build, *verb[1:]], 1, f"{build / 'manifest.json'}: nested deeper than {MAX_DEPTH} levels")


def test_a_deeply_nested_manifest_in_a_resumed_converts_output_is_one_line(build, sample_dir):
    from conftest import sample_args

    (build / "manifest.json").write_text(DEEP)
    expect_error(sample_args(sample_dir, build, "--workers", 1), 1,
                 f"{build / 'manifest.json'}: nested deeper than {MAX_DEPTH} levels; use --overwrite")


@pytest.mark.parametrize("name", ["verify.json", "trainer-check.json"])
def test_a_deeply_nested_document_beside_a_build_is_a_note_on_its_page(build, name):
    (build / name).write_text(DEEP)
    assert run_cli("report", build).exit_code == 0
    assert f"{name}: nested deeper than {MAX_DEPTH} levels; left out" in (
        build / "report.html").read_text()


def test_a_lock_file_of_any_bytes_is_no_traceback(tmp_path):
    import fcntl

    from imagenet_build.infra.lock import LOCK_NAME, writing_now

    lock = tmp_path / LOCK_NAME
    lock.write_text(DEEP[:4096])
    with open(lock, "rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        assert writing_now(tmp_path).startswith("imagenet-build (")
