"""The cases the doors were built for, each as a user met it: an index or a build written into another complete
build, its index folder or an input; a page, a CSV or a picture written over a device, a FIFO or through a link; a
rerun's receipts written through a job folder that is a link; a FIFO or a link to /dev/zero in place of a build's
file hanging verify, report or a convert rerun. Each ends in one line, exit 1 or 2, nothing written where it must not
be, within a bound that only a hang reaches (the verbs run in this process: an alarm ends a blocking read, a cap on
memory a read of /dev/zero)."""

import os
import shutil
import stat

import pytest

from conftest import sample_args, tree_digest
from hostile_paths import run_bounded

SHARD = "train-00000-of-00004"


def run(*args):
    """(exit code, stdout, stderr) of the verb run in this process, bounded in time and in memory."""
    return run_bounded(args, memory=4 << 30)


def one_line(code, stderr, *named):
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert code in (1, 2) and len(lines) == 1 and lines[0].startswith("error: "), (code, stderr[-3000:])
    assert all(str(name) in lines[0] for name in named), lines[0]
    return lines[0]


@pytest.fixture
def two(converted, tmp_path):
    """A complete build, and another one whose shard is indexed into it."""
    shutil.copytree(converted, tmp_path / "build")
    shutil.copytree(converted, tmp_path / "other")
    return tmp_path / "build", tmp_path / "other"


# ------------------------------------------------------------------ an index written into another build


@pytest.mark.parametrize("where", ["its index folder", "the build folder", "a link to its index folder",
                                   "its index folder through ..", "an input's class folder"])
def test_index_writes_no_index_into_another_build_or_an_input(two, sample_copy, where):
    build, other = two
    link = build.parent / "link"
    link.symlink_to(build / "dali_idx")
    folder = {"its index folder": build / "dali_idx", "the build folder": build, "a link to its index folder": link,
              "its index folder through ..": build / "dali_idx" / ".." / "dali_idx",
              "an input's class folder": sample_copy / "train" / "n01440764"}[where]
    before, inputs = tree_digest(build), tree_digest(sample_copy)
    one_line(*run("index", other / SHARD, "--index-dir", folder, "--workers", 1)[::2], folder)
    assert tree_digest(build) == before and tree_digest(sample_copy) == inputs


def test_the_python_api_index_writes_no_index_into_another_build(two):
    from imagenet_build import api
    from imagenet_build.infra.errors import BuildError

    build, other = two
    before = tree_digest(build)
    with pytest.raises(BuildError, match="--index-dir"):
        api.index(other / SHARD, index_dir=build / "dali_idx", workers=1)
    assert tree_digest(build) == before


def test_index_writes_no_index_into_a_builds_prefix_on_an_object_store(two, bucket):
    import fsspec

    build, other = two
    fs, root = fsspec.core.url_to_fs(bucket)
    fs.put(str(build), f"{root}/complete-build", recursive=True)
    before = sorted(fs.find(root))
    one_line(*run("index", other / SHARD, "--index-dir", f"{bucket}/complete-build/dali_idx", "--workers", 1)[::2],
             f"{bucket}/complete-build")
    assert sorted(fs.find(root)) == before


def test_index_still_writes_a_builds_own_indexes_and_a_folder_of_indexes(two, tmp_path):
    build, other = two
    shutil.rmtree(build / "dali_idx")
    code, _, stderr = run("index", build, "--workers", 1)
    assert code == 0, stderr
    assert tree_digest(build) == tree_digest(other)  # the same indexes again, where the build keeps them
    code, _, stderr = run("index", other / SHARD, "--index-dir", tmp_path / "indexes", "--workers", 1)
    assert code == 0 and (tmp_path / "indexes" / f"{SHARD}.idx").read_bytes() == \
        (other / "dali_idx" / f"{SHARD}.idx").read_bytes()


# ------------------------------------------------------------------ a build written inside another


@pytest.mark.parametrize("output, index", [
    ("new", "build/dali_idx"), ("build/sub", None), ("build/dali_idx/../sub", None), ("new", "build/dali_idx/sub"),
], ids=["--index-dir its index folder", "--output-dir inside it", "--output-dir inside it through ..",
        "--index-dir inside its index folder"])
def test_convert_writes_no_build_inside_another(two, sample_dir, output, index):
    build, _ = two
    tmp = build.parent
    before = tree_digest(build)
    more = ["--index-dir", tmp / index] if index else []
    one_line(*run(*sample_args(sample_dir, tmp / output, "--workers", 1, *more))[::2], build)
    assert tree_digest(build) == before and not (tmp / "new").exists()


# ------------------------------------------------------------------ a file written over a node, or through a link


def _device(path):
    """The null device's numbers, in this test's folder (as root; else the machine's own, which only root could
    replace)."""
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        return "/dev/null"
    return path


def _fifo(path):
    os.mkfifo(path)
    return path


def _stdout(path):
    os.symlink("/dev/stdout", path)
    return path


NODES = {"a character device": _device, "a FIFO": _fifo, "a link to /dev/stdout": _stdout}
WRITERS = {
    "report -o": lambda build, xml, target: ["report", build, "-o", target],
    "bboxes -o": lambda build, xml, target: ["bboxes", xml, "-o", target],
    "trainer-check --show": lambda build, xml, target: ["trainer-check", build, "--framework", "torch", "--show",
                                                        target],
}


@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize("node", NODES)
def test_no_file_is_written_over_a_device_a_fifo_or_through_a_link(build, tmp_path, writer, node):
    xml = tmp_path / "xml" / "n01440764"
    xml.mkdir(parents=True)
    (xml / "n01440764_1.xml").write_text(
        "<annotation><size><width>10</width><height>10</height></size><object><name>n01440764</name><bndbox>"
        "<xmin>1</xmin><ymin>1</ymin><xmax>5</xmax><ymax>5</ymax></bndbox></object></annotation>")
    target = NODES[node](tmp_path / "target")
    before = os.lstat(target)
    one_line(*run(*WRITERS[writer](build, tmp_path / "xml", target))[::2], target)
    after = os.lstat(target)
    assert (after.st_mode, after.st_ino, after.st_rdev) == (before.st_mode, before.st_ino, before.st_rdev)


def test_report_writes_no_page_into_a_builds_prefix_on_an_object_store(build, bucket):
    import fsspec

    fs, root = fsspec.core.url_to_fs(bucket)
    fs.put(str(build), f"{root}/complete-build", recursive=True)
    before = sorted(fs.find(root))
    one_line(*run("report", build, "-o", f"{bucket}/complete-build/dali_idx/x.html")[::2], "complete-build")
    assert sorted(fs.find(root)) == before


# ------------------------------------------------------------------ a rerun's job folder, a link elsewhere


@pytest.mark.parametrize("link", [".convert-job", ".convert-job/results"])
def test_a_reruns_receipts_are_never_written_through_a_link(build, sample_dir, tmp_path, link):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (build / SHARD).unlink()  # what a killed run left: a shard to write again
    (build / link).parent.mkdir(exist_ok=True)
    (build / link).symlink_to(elsewhere)
    one_line(*run(*sample_args(sample_dir, build, "--workers", 1))[::2], build)
    assert list(elsewhere.iterdir()) == []


# ------------------------------------------------------------------ a build's file that is no file


HANGS = {"a FIFO": os.mkfifo, "a link to /dev/zero": lambda path: os.symlink("/dev/zero", path)}
READERS = {
    "verify": lambda build, tmp: ["verify", build, "--workers", 1],
    "verify --quick": lambda build, tmp: ["verify", build, "--quick", "--workers", 1],
    "report": lambda build, tmp: ["report", build, "-o", tmp / "page.html"],
    "convert (a rerun)": None,
}


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("name", ["features.json", "dataset_info.json", SHARD, f"dali_idx/{SHARD}.idx"])
@pytest.mark.parametrize("node", HANGS)
def test_no_verb_hangs_on_a_fifo_or_dev_zero_in_a_build(build, sample_dir, tmp_path, reader, name, node):
    (build / name).unlink()
    HANGS[node](build / name)
    args = READERS[reader](build, tmp_path) if READERS[reader] else sample_args(sample_dir, build, "--workers", 1)
    code, stdout, stderr = run(*args)
    if reader.startswith("verify"):  # verify's report names each problem
        assert code == 1 and f"{os.path.basename(name)}: not a regular file" in stdout, stdout[-3000:]
        assert "Traceback" not in stderr, stderr
    else:
        one_line(code, stderr, os.path.basename(name))
    assert os.path.lexists(build / name) and not os.path.isfile(build / name)
