"""The sample verb (tools/sample_dataset.py): every copy kind in its --help, and the convert command it prints gives
the ILSVRC build from every kind's sample."""

import io

import pytest

from conftest import run_cli, shard_files
from helpers import user_copy_of
from imagenet_build.format.record_schema import decode_example
from imagenet_build.format.tfrecord import read_records
from imagenet_build.sources.copies import sample_kinds


def validation_records(out):
    """[record features] of a build's validation shards, in shard order."""
    found = []
    for shard in sorted(out.glob("validation-*")):
        data = shard.read_bytes()
        found.extend(decode_example(payload) for _, payload, _ in read_records(io.BytesIO(data), len(data)))
    return found


def assert_evaluation_build(out, reference, sample, ilsvrc):
    """An evaluation set's build of the sample: no train shard, the ILSVRC build's validation images each once,
    untouched, in the same order, each record's class put one to one on the reference's."""
    assert not list(out.glob("train-*"))
    mine, theirs = validation_records(out), validation_records(reference)
    assert [r["image/encoded"] for r in mine] == [r["image/encoded"] for r in theirs]
    same_classes = (sample / "labels.txt").read_text() == (ilsvrc / "labels.txt").read_text()
    pairs = {(t["image/class/synset"][0], m["image/class/synset"][0]) for m, t in zip(mine, theirs)}
    assert len({a for a, _ in pairs}) == len({b for _, b in pairs}) == len(pairs)  # one to one
    for m, t in zip(mine, theirs):
        folder, _, name = m["image/filename"][0].decode().partition("/")
        assert name.split(".")[0] == t["image/filename"][0].decode().split(".")[0] and folder
        if same_classes:
            assert {k: v for k, v in m.items() if k != "image/filename"} == \
                {k: v for k, v in t.items() if k != "image/filename"}


def test_sample_help_lists_every_copy_kind():
    result = run_cli("sample", "--help")
    assert f"[{'|'.join(sample_kinds())}]" in result.output.replace("\n", "").replace(" ", ""), result.output


@pytest.mark.parametrize("kind", list(sample_kinds()))
def test_the_convert_command_sample_prints_gives_the_ilsvrc_build(ilsvrc, reference, tmp_path, kind):
    """Followed as printed (boxes from bboxes.csv where the copy carries none), every kind's sample converts to
    the shards of the ILSVRC2012 tarballs (blurred: its re-encoded and left-out images aside; an evaluation set:
    the validation images alone, each record the ILSVRC build's but its image/filename, where the set has the
    sample's classes, and the classes put one to one on the set's where the set has a fixed subset)."""
    import re
    import shlex

    result = run_cli("sample", tmp_path / "s", "--layout", kind)
    assert result.exit_code == 0, result.output
    printed = result.stdout.splitlines()[-1]
    assert printed.startswith("convert it with: imagenet-build convert "), printed
    args = shlex.split(printed[len("convert it with: imagenet-build "):])
    out = tmp_path / "out"
    args[args.index("OUTPUT")] = str(out)
    converted = run_cli(*args, "--workers", 1)
    assert converted.exit_code == 0, converted.output
    if kind == "blurred":  # other image bytes, two images fewer: the boxes are what the printed command adds
        assert re.search(r"boxes: [1-9]\d* images got boxes", converted.stdout), converted.stdout
    elif sample_kinds()[kind].evaluation:
        assert_evaluation_build(out, reference, tmp_path / "s", ilsvrc)
    else:
        assert shard_files(out) == shard_files(reference)


@pytest.mark.parametrize("tarballs", [False, True], ids=["folders", "tarballs"])
def test_sample_prints_convert_from_the_sample_and_it_gives_the_ilsvrc_build(reference, tmp_path, tarballs):
    """`sample DIR` printed a --train-dir/--validation-dir command (with --tarballs too), and `convert --from DIR`
    refused the sample: it prints `convert --from DIR` with shard counts alone, which takes the sample as it is (its
    own classes, validation labels and boxes, where the copy carries none, named by the note beside it), and
    that gives the ILSVRC2012 build."""
    import shlex

    sample = tmp_path / "s"
    result = run_cli("sample", sample, *(["--tarballs"] if tarballs else []))
    assert result.exit_code == 0, result.output
    printed = shlex.split(result.stdout.splitlines()[-1][len("convert it with: imagenet-build "):])
    assert printed == ["convert", "--from", str(sample), "--train-shards", "4", "--validation-shards", "2",
                       "--layout-threads", "2", "--output-dir", "OUTPUT"]
    printed[printed.index("OUTPUT")] = str(tmp_path / "out")
    converted = run_cli(*printed, "--workers", 1)
    assert converted.exit_code == 0, converted.output
    assert converted.stdout.startswith(f"found: ILSVRC2012 (image-net.org) {'tarballs' if tarballs else 'folders'}")
    own = "labels.txt, validation_labels.txt" if tarballs else "bboxes.csv, labels.txt, validation_labels.txt"
    assert f"note: the sample's own {own} (imagenet-build-sample.json)" in converted.stdout
    assert shard_files(tmp_path / "out") == shard_files(reference)


def test_a_flat_validation_folder_labelled_outside_the_classes_names_the_option_that_labels_it(sample_dir, tmp_path):
    """--from the sample with its classes but not its validation labels: the shipped ILSVRC2012 labels give its
    16 images other synsets; the line said only that the folder held none of the labels file's synsets."""
    copy = user_copy_of(sample_dir, tmp_path / "copy")
    result = run_cli("convert", "--from", copy, "--labels-file", copy / "labels.txt",
                     "--output-dir", tmp_path / "out")
    assert result.exit_code == 1
    assert result.stderr == (f"error: {copy / 'validation'}: holds no ILSVRC2012_val_*.JPEG images of the "
                             "synsets in the labels file as the validation labels file labels them (16 of other "
                             "synsets); pass the --validation-labels-file that labels these images\n")
