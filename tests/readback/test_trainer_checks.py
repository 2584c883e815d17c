"""The checks of trainer-check on synthetic epochs and arrays: fast, and each able to fail.

The readers (DALI, PyTorch) are exercised end to end in test_trainer.py, test_torch.py and
test_trainer_faults.py (the faults both must fail alike); here every rule of checks.py, and the one
order run_checks takes every reader through, is held to a case that passes and a case that must
fail, without a pipeline.
"""

import math
from collections import Counter

import pytest

from imagenet_build.format.tfrecord import frame
from imagenet_build.infra.errors import BuildError
from imagenet_build.readback.checks import Report, check_batches, check_epoch, check_loss, check_overfit


@pytest.fixture
def shards(tmp_path):
    """Two shard files of 3 and 2 records: what check_epoch counts against."""
    paths = []
    for name, count in (("train-00000-of-00002", 3), ("train-00001-of-00002", 2)):
        data = b""
        for k in range(count):
            payload = f"record {k}".encode()
            head, foot = frame(payload)
            data += head + payload + foot
        (tmp_path / name).write_bytes(data)
        paths.append(str(tmp_path / name))
    return paths


def epoch(shards, ranks=1, labels=(1, 2, 1, 2, 2)):
    """(rank, file, offset, filename, label) for the 5 records, spread over `ranks` contiguous ranges."""
    places = [(shards[0], 0), (shards[0], 24), (shards[0], 48), (shards[1], 0), (shards[1], 24)]
    return [(k * ranks // 5, file, offset, f"img{k}.JPEG", labels[k]) for k, (file, offset) in enumerate(places)]


MANIFEST = {"splits": {"train": {"records": 5, "label_counts": {"1": 2, "2": 3}}}}


def results(report):
    return {c["name"]: c for c in report.checks}


def test_a_whole_epoch_over_disjoint_ranks_passes(shards):
    report = Report()
    check_epoch(report, epoch(shards, ranks=2), MANIFEST, "train", shards, 2, classes=2)
    assert report.ok, report.checks
    assert results(report)["epoch"]["detail"].startswith("5 records over 2 rank(s)")


def test_a_short_epoch_fails_against_the_shards_and_the_manifest(shards):
    report = Report()
    check_epoch(report, epoch(shards)[:-1], MANIFEST, "train", shards, 1, classes=2)
    detail = results(report)["epoch"]
    assert not detail["ok"] and "manifest.json says 5" in detail["detail"] and "the shards hold 5" in detail["detail"]


def test_a_record_read_twice_or_on_two_ranks_fails(shards):
    seen = epoch(shards, ranks=2)
    twice = seen + [(1, *seen[0][1:])]  # record 0 again, on rank 1
    report = Report()
    check_epoch(report, twice, None, "train", shards, 2, classes=2)
    checks = results(report)
    assert not checks["epoch"]["ok"] and "read more than once" in checks["epoch"]["detail"]
    assert not checks["ranks"]["ok"]


def test_the_same_image_under_two_shards_fails(shards):
    seen = epoch(shards)
    seen[4] = seen[4][:3] + ("img0.JPEG", seen[0][4])  # record 0 again in another shard: name, label, size
    report = Report()
    check_epoch(report, seen, None, "train", shards, 1, classes=2)
    assert "present more than once" in results(report)["epoch"]["detail"]


def test_one_file_name_in_every_class_is_many_records(shards):
    """Class folders each holding img000.jpg: a record is its place (shard, offset), not its file name."""
    seen, per_class = [], Counter()
    for rank, file, offset, _, label in epoch(shards, ranks=2):
        seen.append((rank, file, offset, f"img{per_class[label]:03d}.jpg", label))  # img000.jpg in each class
        per_class[label] += 1
    report = Report()
    check_epoch(report, seen, MANIFEST, "train", shards, 2, classes=2)
    assert report.ok, report.checks


def test_zero_based_labels_and_a_wrong_histogram_fail(shards):
    report = Report()
    check_epoch(report, epoch(shards, labels=(0, 1, 0, 1, 1)), MANIFEST, "train", shards, 1, classes=2)
    labels = results(report)["labels"]
    assert not labels["ok"] and "outside [0, 2)" in labels["detail"] and "histogram" in labels["detail"]


def test_record_count_names_a_broken_shard(shards):
    with open(shards[1], "ab") as f:
        f.write(b"junk")
    with pytest.raises(BuildError, match="run imagenet-build verify"):
        check_epoch(Report(), epoch(shards), None, "train", shards, 1, classes=2)


def test_normalised_batches_pass_raw_and_twice_normalised_fail():
    np = pytest.importorskip("numpy")
    rng = np.random.default_rng(0)
    normalised = [rng.normal(0, 1, (4, 8, 8, 3)).astype("float32") for _ in range(3)]
    report = Report()
    mean, std = check_batches(report, normalised)
    assert report.ok and all(abs(m) < 0.2 for m in mean) and all(0.8 < s < 1.2 for s in std)
    for bad, why in (([b * 58 + 120 for b in normalised], "raw"), ([b / 58 for b in normalised], "twice")):
        report = Report()
        check_batches(report, bad)
        assert not results(report)["normalisation"]["ok"], why


def test_a_batch_of_one_image_repeated_fails():
    np = pytest.importorskip("numpy")
    one = np.random.default_rng(1).normal(0, 1, (1, 8, 8, 3))
    report = Report()
    check_batches(report, [np.repeat(one, 4, axis=0)])
    assert not results(report)["batches"]["ok"]


@pytest.mark.parametrize("losses,failure,ok,detail", [
    ([2.3, 1.9, 1.5], "", True, "3 steps, loss 2.300 -> 1.500"),
    ([2.3, 1.9, math.nan, math.nan], "", False, "loss is not finite (NaN/inf) from step 3 of 4 (it was 1.900 at "
                                                "step 2): labels out of range or pixels not normalised?"),
    ([math.inf], "", False, "loss is not finite (NaN/inf) from step 1 of 1: labels out of range or pixels not "
                            "normalised?"),
    ([], "", False, "no training steps ran"),
    ([2.3], "training failed after 1 steps: label 7 outside [0, 4)", False,
     "training failed after 1 steps: label 7 outside [0, 4)"),
])
def test_loss_is_finite_through_every_step(losses, failure, ok, detail):
    """A loss that stops being finite is named by the step it began at, and the loss just before."""
    report = Report()
    check_loss(report, losses, failure)
    assert report.ok is ok and results(report)["loss"]["detail"] == detail


@pytest.mark.parametrize("fixed,ok", [([2.0, 1.2, 0.9], True), ([2.0, 1.5, 1.1], False), ([], False),
                                      ([2.0, math.nan], False), ([2.0, 1.0], False), ([0.0, 0.0], False)])
def test_overfit_needs_the_loss_to_halve(fixed, ok):
    report = Report()
    check_overfit(report, fixed, "", 16, classes=4)
    assert report.ok is ok
    detail = results(report)["overfit"]["detail"]
    assert detail == "no training steps ran" if not fixed else detail.endswith("(did not halve: labels do not "
                                                                               "match the images?)") != ok


@pytest.mark.parametrize("fixed,ok", [([0.0, 0.0], True), ([0.0004, 0.0], True), ([0.0, 0.01], False),
                                      ([-0.01, 0.0], False), ([2.0, 0.5], False), ([0.0, math.nan], False),
                                      ([], False)])
def test_overfit_of_one_class_asks_a_loss_of_0_and_says_why(fixed, ok):
    """One class: cross-entropy is 0 for any image, so the loss cannot halve; it must stay 0 (a model with more
    outputs than classes would not give 0), and the report says why no more is asked."""
    report = Report()
    check_overfit(report, fixed, "", 16, classes=1)
    assert report.ok is ok, report.checks
    detail = results(report)["overfit"]["detail"]
    if ok:
        assert detail.startswith("loss on 16 fixed images 0.000 -> 0.000: 1 class, whose cross-entropy is 0")
    elif fixed:
        assert detail.endswith("(1 class: the loss should be 0; more model outputs than classes?)"), detail
    else:
        assert detail == "no training steps ran"


def test_slow_training_rates_are_reported_not_rounded_to_zero():
    """ResNet-50 on a CPU trains at well under one image a second: the report shows the figure."""
    from imagenet_build.readback.checks import format_report, result_of

    result = result_of(Report(), split="train", device="cpu", model="resnet50", batch_size=16, steps=2, ranks=1,
                       records=48, pipeline_rate=412.34, train_rate=0.04123, losses=[2.0, 1.9], fixed=[2.0, 0.5],
                       channel_mean=[0, 0, 0], channel_std=[1, 1, 1], started=0.0)
    assert (result["images_per_second"], result["training_images_per_second"]) == (412.3, 0.0412)
    assert "read+decode+augment: 412 images/s; training: 0.0412 images/s" in "\n".join(format_report(result))


class FakeReader:
    """A reader's steps as trainer-check takes them, without a pipeline: the epoch of `shards`, normalised
    batches, a loss that falls; `fails` makes training stop with that reason."""

    name = "the fake reader"

    def __init__(self, seen, fails=""):
        self.seen, self.fails, self.asked = seen, fails, []

    def read_epoch(self):
        self.asked.append("epoch")
        return self.seen

    def sample(self, count):
        import numpy as np

        self.asked.append(("sample", count))
        rng = np.random.default_rng(0)
        return [rng.standard_normal((4, 8, 8, 3)) for _ in range(count)], 100.0

    def train(self, classes):
        self.asked.append(("train", classes))
        return [2.0, 1.5], self.fails, 10.0

    def overfit(self, classes):
        self.asked.append(("overfit", classes))
        return [2.0, 0.5], "", 4


def test_every_reader_is_taken_through_the_same_checks_in_one_order(shards):
    """run_checks is the one sequence both trainer-check paths use: a reader supplies its steps, the checks,
    their order and the report are the same for all (a reader that stops training fails `loss`)."""
    from imagenet_build.readback.checks import Settings, run_checks

    settings = Settings("out", "train", "cpu", "small", batch_size=1, steps=2, num_shards=1)
    reader = FakeReader(epoch(shards))
    result = run_checks(reader, settings, MANIFEST, shards, started=0.0)
    assert [c["name"] for c in result["checks"]] == ["epoch", "ranks", "labels", "batches", "normalisation",
                                                      "loss", "overfit"]
    assert result["ok"], result["checks"]
    assert reader.asked == ["epoch", ("sample", 5), ("train", 2), ("overfit", 2)]  # classes: the labels seen
    assert (result["records"], result["loss"], result["overfit_loss"]) == (5, {"first": 2.0, "last": 1.5},
                                                                           {"first": 2.0, "last": 0.5})
    stopped = run_checks(FakeReader(epoch(shards), fails="training stopped at step 2"), settings, MANIFEST, shards,
                         started=0.0)
    assert not stopped["ok"] and results_of(stopped)["loss"]["detail"] == "training stopped at step 2"
    with pytest.raises(BuildError, match="^out: the fake reader read no train records at all$"):
        run_checks(FakeReader([]), settings, MANIFEST, shards, started=0.0)


def results_of(result):
    return {c["name"]: c for c in result["checks"]}


class ShowingReader(FakeReader):
    """FakeReader whose training loop hands its batches to --show's capture, as the real readers' loops do."""

    def __init__(self, seen, fails=""):
        from imagenet_build.readback.show_grid import BatchCapture

        super().__init__(seen, fails)
        self.capture = BatchCapture((0, 0, 0), (1, 1, 1))

    def train(self, classes):
        import numpy as np

        self.capture.step(np.full((2, 8, 8, 3), 100.0, dtype=np.float32), np.array([0, 1]))
        return super().train(classes)


def test_the_picture_is_drawn_whatever_the_checks_found(shards, tmp_path):
    """--show: the picture is written when the checks pass and when they fail (then it is most wanted), its
    path in the result and in the readable report."""
    from imagenet_build.readback.checks import Settings, format_report, run_checks
    from imagenet_build.readback.show_grid import read_layout

    for fails in ("", "training stopped at step 2"):
        picture = tmp_path / f"batches{len(fails)}.png"
        settings = Settings("out", "train", "cpu", "small", 1, 2, 1, show=str(picture))
        result = run_checks(ShowingReader(epoch(shards), fails), settings, MANIFEST, shards, started=0.0)
        assert result["ok"] == (not fails) and result["show"] == str(picture)
        assert f"  the batches as fed to the model: {picture}" in format_report(result)
        assert [row["title"] for row in read_layout(picture)["rows"]] == ["training step 1: 2 images"]
