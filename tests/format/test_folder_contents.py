"""What a build folder may hold: one rule (format/folder_contents.py) that convert, verify and write_arrays share.

Besides a build's own files, a run's lock, a temporary file, a spool of decompressed .tar.gz inputs, an
interrupted Beam run's figures and the kept listings: convert resumes such a folder, verify passes it
(it called the temporary file, the spool and the Beam figures strays while convert accepted them),
write_arrays adds to it; anything else is a stranger that convert refuses and verify names.
"""

import json

import pytest

from conftest import run_cli, sample_args
from imagenet_build import write_arrays
from imagenet_build.format.folder_contents import MAY_HOLD, folder_entries

# what a run keeps or uses in a build folder, made in a test: (name, a folder?)
RUN_ENTRIES = {
    "lock": (".imagenet-build.lock", False),
    "temporary file": (".train-00001-of-00004.4242.tmp", False),
    "spool": (".imagenet-build-spool-999999999-train-abcd1234", True),  # of a run gone (no such pid)
    "job": (".convert-job", True),
    "listings": (".imagenet-build-listings", True),
}
# what the checking verbs leave there for `report` (docs/report.md)
REPORT_ENTRIES = ("verify.json", "trainer-check.json", "trainer-check.png", "report.html")
STRANGERS = {
    "a text file": ("notes.txt", False),
    "a folder named like a shard": ("train-00009-of-00010", True),
    "a hidden file": (".DS_Store", False),
    "a folder named like a report file": ("verify.json", True),
}


def make(folder, name, is_dir):
    if is_dir:
        (folder / name).mkdir()
        (folder / name / "part").write_bytes(b"x")
    else:
        (folder / name).write_bytes(b"x")


def kinds(output, index):
    return {(e.name, e.in_index_folder): (e.kind, e.shard) for e in folder_entries(str(output), str(index))}


def test_every_entry_has_its_kind(tmp_path):
    out = tmp_path / "out"
    (out / "dali_idx").mkdir(parents=True)
    for name in ("train-00000-of-00002", "test-00000-of-00001", "labels.txt", *REPORT_ENTRIES[1:]):
        (out / name).write_bytes(b"x")
    make(out, "manifest.json", True)
    for name in ("train-00000-of-00002.idx", "foo.idx", ".train-00000-of-00002.idx.7.tmp", ".imagenet-build.lock"):
        (out / "dali_idx" / name).write_bytes(b"x")
    for entries in (RUN_ENTRIES, STRANGERS):
        for name, is_dir in entries.values():
            if not (out / name).exists():
                make(out, name, is_dir)
    (out / "dali_idx" / "sub").mkdir()
    found = kinds(out, out / "dali_idx")
    assert found == {
        ("train-00000-of-00002", False): ("shard", "train-00000-of-00002"),
        ("test-00000-of-00001", False): ("shard", "test-00000-of-00001"),  # any split: write_arrays' test split
        ("labels.txt", False): ("record", ""),
        **{(name, False): ("report", "") for name in REPORT_ENTRIES[1:]},
        ("manifest.json", False): ("stranger", ""),  # a folder
        ("dali_idx", False): ("index-folder", ""),
        (".imagenet-build.lock", False): ("run", ""),
        (".train-00001-of-00004.4242.tmp", False): ("temp", ""),
        (".imagenet-build-spool-999999999-train-abcd1234", False): ("run", ""),
        (".convert-job", False): ("run", ""),
        (".imagenet-build-listings", False): ("run", ""),
        ("notes.txt", False): ("stranger", ""),
        ("train-00009-of-00010", False): ("stranger", ""),
        (".DS_Store", False): ("stranger", ""),
        ("verify.json", False): ("stranger", ""),  # a folder
        ("train-00000-of-00002.idx", True): ("index", "train-00000-of-00002"),
        ("foo.idx", True): ("stranger", ""),  # an index is <shard name>.idx
        (".train-00000-of-00002.idx.7.tmp", True): ("temp", ""),
        (".imagenet-build.lock", True): ("run", ""),
        ("sub", True): ("stranger", ""),
    }


def test_indexes_beside_the_shards_and_elsewhere(tmp_path):
    out, elsewhere = tmp_path / "out", tmp_path / "idx"
    out.mkdir()
    elsewhere.mkdir()
    for name in ("train-00000-of-00001", "train-00000-of-00001.idx"):
        (out / name).write_bytes(b"x")
    (elsewhere / "train-00000-of-00001.idx").write_bytes(b"x")
    assert kinds(out, out) == {("train-00000-of-00001", False): ("shard", "train-00000-of-00001"),
                               ("train-00000-of-00001.idx", False): ("index", "train-00000-of-00001")}
    assert kinds(out, elsewhere) == {("train-00000-of-00001", False): ("shard", "train-00000-of-00001"),
                                     ("train-00000-of-00001.idx", False): ("stranger", ""),  # not where indexes go
                                     ("train-00000-of-00001.idx", True): ("index", "train-00000-of-00001")}


def verify_report(folder):
    result = run_cli("verify", folder, "--workers", 1, "--json")
    return result.exit_code, json.loads(result.stdout)


@pytest.mark.parametrize("kind", RUN_ENTRIES)
def test_convert_and_verify_agree_on_what_a_run_leaves(kind, build, sample_dir):
    name, is_dir = RUN_ENTRIES[kind]
    make(build, name, is_dir)
    code, report = verify_report(build)
    assert code == 0, report["problems"]
    rerun = run_cli(*sample_args(sample_dir, build, "--workers", 1, "--json"))
    assert rerun.exit_code == 0, rerun.output
    assert json.loads(rerun.stdout)["shards_kept"] == 4 + 2
    # what a killed run left is removed by the next: its temporary file, its spool, its lock (the next run's own),
    # its job (read, then removed once the manifest is complete), an earlier version's Beam figures
    assert (build / name).exists() == (kind == "listings")


def test_convert_and_verify_keep_what_the_report_picks_up(build, sample_dir):
    for name in REPORT_ENTRIES:
        (build / name).write_bytes(b"{}")
    code, report = verify_report(build)
    assert code == 0, report["problems"]
    rerun = run_cli(*sample_args(sample_dir, build, "--workers", 1, "--json"))
    assert rerun.exit_code == 0, rerun.output
    assert json.loads(rerun.stdout)["shards_kept"] == 4 + 2
    assert all((build / name).read_bytes() == b"{}" for name in REPORT_ENTRIES)


def test_a_picture_trainer_check_wrote_under_another_name_is_the_builds_and_any_other_png_a_stranger(build,
                                                                                                       sample_dir):
    from PIL import Image
    from PIL.PngImagePlugin import PngInfo

    from imagenet_build.format.naming import TRAINER_PICTURE_KEY

    layout = PngInfo()
    layout.add_text(TRAINER_PICTURE_KEY, json.dumps({"rows": []}))  # what trainer-check --show writes (show_grid)
    Image.new("RGB", (8, 8)).save(build / "batches.png", pnginfo=layout)
    code, report = verify_report(build)
    assert code == 0, report["problems"]
    rerun = run_cli(*sample_args(sample_dir, build, "--workers", 1, "--json"))
    assert rerun.exit_code == 0 and json.loads(rerun.stdout)["shards_kept"] == 4 + 2, rerun.output
    Image.new("RGB", (8, 8)).save(build / "holiday.png")
    code, report = verify_report(build)
    assert code == 1 and [(p["file"], p["message"]) for p in report["problems"]] == [
        ("holiday.png", f"stray file: a build folder holds only {MAY_HOLD}")]
    assert "trainer-check.png" in MAY_HOLD and "manifest.json" in MAY_HOLD and "another name" in MAY_HOLD


@pytest.mark.parametrize("kind", STRANGERS)
def test_convert_and_verify_agree_on_a_stranger(kind, build, sample_dir):
    name, is_dir = STRANGERS[kind]
    make(build, name, is_dir)
    code, report = verify_report(build)
    assert code == 1
    assert [p["message"] for p in report["problems"] if p["file"] == name] == [
        f"stray file: a build folder holds only {MAY_HOLD}"]
    refused = run_cli(*sample_args(sample_dir, build, "--workers", 1))
    assert refused.exit_code == 1 and "holds files that are not from imagenet-build" in refused.stderr
    assert name in refused.stderr and (build / name).exists()


def test_write_arrays_keeps_what_a_run_leaves_and_removes_a_temporary_file(tmp_path):
    np = pytest.importorskip("numpy")
    out = tmp_path / "arrays"
    images = np.zeros((8, 4, 4, 3), np.uint8)
    write_arrays(images, np.arange(8) % 2, out, "train", 2)
    for name, is_dir in RUN_ENTRIES.values():
        make(out, name, is_dir)
    write_arrays(images, np.arange(8) % 2, out, "train", 2)
    assert not (out / RUN_ENTRIES["temporary file"][0]).exists()
    kept = [kind for kind, (name, _) in RUN_ENTRIES.items() if (out / name).exists()]
    assert kept == ["spool", "job", "listings"]  # the lock is its own, removed as it ends
    code, report = verify_report(out)
    assert code == 0, report["problems"]


def test_a_png_that_is_none_and_a_folder_named_as_an_index_are_strangers(tmp_path):
    """A .png name holding no PNG is no picture of trainer-check's; in an index folder of its own, a folder named
    as a shard's index is no index."""
    out, index = tmp_path / "out", tmp_path / "indexes"
    out.mkdir()
    (out / "batches.png").write_bytes(b"not a PNG at all")
    (index / "train-00000-of-00002.idx").mkdir(parents=True)
    (index / "train-00001-of-00002.idx").write_bytes(b"0 10\n")
    assert kinds(out, index) == {("batches.png", False): ("stranger", ""),
                                 ("train-00000-of-00002.idx", True): ("stranger", ""),
                                 ("train-00001-of-00002.idx", True): ("index", "train-00001-of-00002")}
