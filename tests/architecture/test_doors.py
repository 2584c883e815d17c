"""The two doors, by construction: no module of the package but infra/write_door.py opens a file to write, renames,
removes or makes one (a folder included), and none but infra/read_door.py opens one to read. Found in the syntax
tree (file_calls.py); a call planted in any other module is named, by file, line and call."""

from pathlib import Path

import pytest

from file_calls import file_calls

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "imagenet_build"
DOORS = {"write": PACKAGE / "infra" / "write_door.py", "read": PACKAGE / "infra" / "read_door.py"}


def outside_the_door(kind, package=PACKAGE):
    """'<module>:<line>: <call>' for every call of `kind` in a module of `package` other than its door."""
    door = DOORS[kind].relative_to(PACKAGE)
    found = []
    for path in sorted(package.rglob("*.py")):
        if path.relative_to(package) == door:
            continue
        found += [f"{path.relative_to(package)}:{c.line}: {c.text}" for c in file_calls(path.read_text())
                  if c.kind == kind]
    return found


@pytest.mark.parametrize("kind", ["write", "read"])
def test_only_the_door_opens_a_file_to(kind):
    assert outside_the_door(kind) == []


@pytest.mark.parametrize("kind", ["write", "read"])
def test_each_door_is_where_the_calls_are(kind):
    """The doors hold the calls the rule refuses elsewhere: the test looks where they are."""
    assert [c for c in file_calls(DOORS[kind].read_text()) if c.kind == kind]


# Every way around the doors the rule knows, as a line of code planted in a module: (code, what it is)
WRITES = [
    'open(path, "w")', 'open(path, "ab")', 'open(path, mode="x")', 'open(path, "r+b")', 'open(path, mode)',
    'io.open(path, "wb")', "os.open(path, os.O_WRONLY | os.O_CREAT)", "os.open(path, os.O_RDWR)",
    "os.open(path, flags)", "os.replace(a, b)", "os.rename(a, b)", "os.remove(path)", "os.unlink(path)",
    "os.rmdir(path)", "os.mkdir(path)", "os.makedirs(path, exist_ok=True)", "os.symlink(a, b)", "os.link(a, b)",
    "os.truncate(path, 0)", "os.mkfifo(path)", "shutil.copy(a, b)", "shutil.copy2(a, b)", "shutil.copyfile(a, b)",
    "shutil.copytree(a, b)", "shutil.move(a, b)", "shutil.rmtree(path)", "tempfile.mkdtemp()",
    "tempfile.TemporaryDirectory()", "tempfile.NamedTemporaryFile()", "tempfile.mkstemp()", 'fs.pipe_file(url, b"")',
    "fs.put_file(a, url)", "fs.rm(url)", 'fs.open(url, "wb")', "fs.mv(a, b)", "fs.makedirs(url)",
    'Path(path).write_bytes(b"")', 'Path(path).write_text("")', "path.unlink()", "path.rmdir()", "path.mkdir()",
    "path.touch()", "path.symlink_to(a)", "path.hardlink_to(a)", "path.rename(a)", "path.replace(a)",
    'path.open("w")', "np.save(path, array)", "array.tofile(path)", 'tarfile.open(path, "w")',
    'gzip.GzipFile(path, "wb")', 'zipfile.ZipFile(path, "w")', "pq.write_table(table, path)",
    "image.save(path)", "figure.savefig(path)", "tar.extractall(path)",
]
READS = [
    "open(path)", 'open(path, "rb")', 'open(path, encoding="utf-8")', "io.open(path)",
    "os.open(path, os.O_RDONLY)", "Path(path).read_bytes()", "Path(path).read_text()", "np.fromfile(path)",
    "np.load(path)", "fs.cat(url)", "fs.cat_file(url)", "fs.open(url)", 'fs.open(url, "rb")', "path.open()",
    "Image.open(path)", "tarfile.open(path)", "gzip.open(path)", "zipfile.ZipFile(path)", "pq.ParquetFile(path)",
]
PREAMBLE = ("import io\nimport os\nimport shutil\nimport tempfile\nimport tarfile\nimport gzip\nimport zipfile\n"
            "from pathlib import Path\nimport numpy as np\nfrom PIL import Image\n\n\ndef planted(path, a, b):\n")


@pytest.mark.parametrize("code", WRITES)
def test_a_write_planted_anywhere_is_found(code):
    (found,) = file_calls(PREAMBLE + f"    {code}\n")
    assert (found.kind, found.text) == ("write", code.replace('"', "'"))


@pytest.mark.parametrize("code", READS)
def test_a_read_planted_anywhere_is_found(code):
    (found,) = file_calls(PREAMBLE + f"    {code}\n")
    assert (found.kind, found.text) == ("read", code.replace('"', "'"))


@pytest.mark.parametrize("code", [
    "write_door.write_bytes(path, data)", "read_door.read_bytes(path)", "write_door.remove(path)",
    'open(os.devnull, "w")', "os.open(os.devnull, os.O_WRONLY)", "os.fdopen(fd, 'rb')",
    'tarfile.open(fileobj=f, mode="w")', "Image.open(io.BytesIO(data))", "figure.savefig(io.BytesIO())",
    "BuildFolder.open(path)", 'text.replace("a", "b")', "progress.save(False)", "path.exists()",
])
def test_what_goes_through_a_door_or_touches_no_file_is_not(code):
    assert file_calls(PREAMBLE + f"    {code}\n") == []


def test_a_file_a_door_opened_may_be_handed_to_a_library_and_no_other():
    source = PREAMBLE + ("    with read_door.open_read(path) as f, Image.open(f) as image:\n        pass\n"
                         "    out = write_door.new_file(path)\n    pq.write_table(table, out)\n"
                         "    data = io.BytesIO()\n    image.save(data)\n    image.save(path)\n")
    assert [(c.kind, c.text) for c in file_calls(source)] == [("write", "image.save(path)")]


def test_a_call_planted_in_a_module_of_the_package_fails_the_rule(tmp_path):
    """The rule run on a copy of the package with one write and one read added to writer/convert_run.py names both."""
    import shutil

    copy = tmp_path / "imagenet_build"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    with open(copy / "writer" / "convert_run.py", "a") as f:
        f.write('\n\ndef _around(path):\n    os.replace(path, path + ".old")\n    return open(path).read()\n')
    lines = (copy / "writer" / "convert_run.py").read_text().count("\n")
    assert outside_the_door("write", copy) == [f"writer/convert_run.py:{lines - 1}: os.replace(path, path + '.old')"]
    assert outside_the_door("read", copy) == [f"writer/convert_run.py:{lines}: open(path)"]
