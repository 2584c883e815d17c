"""The checks of trainer-check on synthetic epochs and arrays: fast, and each able to fail.

The readers (DALI, PyTorch) are exercised end to end in test_trainer.py, tests/readers/test_torch.py and
test_trainer_faults.py (the faults both must fail alike); here every rule of checks.py, and the one
order run_checks takes every reader through, is held to a case that passes and a case that must
fail, without a pipeline.
"""

import math
from collections import Counter

import pytest

from imagenet_build.format.tfrecord import frame
from imagenet_build.infra.errors import BuildError
from imagenet_build.trainercheck.checks import (
    Report,
    check_batches,
    check_epoch,
    check_loss,
    check_overfit,
    per_second,
    rate,
)
from synthetic_epochs import MANIFEST, epoch, two_shards


@pytest.fixture
def shards(tmp_path):
    return two_shards(tmp_path)


def results(report):
    return {c["name"]: c for c in report.checks}


def test_a_whole_epoch_over_disjoint_ranks_passes(shards):
    report = Report()
    check_epoch(report, epoch(shards, ranks=2), MANIFEST, "train", shards, 2, classes=2)
    assert report.ok, report.checks
    assert results(report)["epoch"]["detail"].startswith("5 records over 2 rank(s)")


def details(report):
    return {c["name"]: (c["ok"], c["detail"]) for c in report.checks}


def test_the_epoch_ranks_and_labels_say_what_they_counted(shards):
    report = Report()
    check_epoch(report, epoch(shards, ranks=2), MANIFEST, "train", shards, 2, classes=2)
    assert details(report) == {"epoch": (True, "5 records over 2 rank(s); manifest: 5"),
                               "ranks": (True, "2 rank(s), disjoint"),
                               "labels": (True, "labels - 1 in [0, 1], 2 classes")}
    report = Report()
    check_epoch(report, epoch(shards), None, "train", shards, 1, classes=3)  # no manifest: its figure left out
    assert details(report)["epoch"] == (True, "5 records over 1 rank(s)")
    assert details(report)["labels"] == (True, "labels - 1 in [0, 1], 3 classes")


def test_each_epoch_problem_is_named_in_words_and_they_are_joined(shards):
    """A short epoch read twice: the manifest's count, the shards', the record read twice (its shard and
    byte), each in its own words, joined with '; '; the reader is named (DALI unless said)."""
    seen = epoch(shards)[:3] + [epoch(shards)[2]]
    report = Report()
    check_epoch(report, seen, MANIFEST, "train", shards, 1, classes=2)
    assert details(report)["epoch"] == (False, "epoch has 4 records, manifest.json says 5; DALI delivered 4 records, "
                                               f"the shards hold 5 (an index drops or repeats some); 1 record(s) "
                                               f"read more than once, e.g. {shards[0]} at byte 48")
    report = Report()
    check_epoch(report, epoch(shards) + [(1, *epoch(shards)[0][1:])], None, "train", shards, 2, classes=2,
                reader="the PyTorch reader")
    assert details(report)["epoch"][1].startswith("the PyTorch reader delivered 6 records, the shards hold 5")
    assert details(report)["ranks"] == (False, "1 record(s) reach more than one rank")


def test_two_records_are_one_image_only_when_their_sizes_agree_too(tmp_path):
    """The same file name and label at two places is the same image (a shard under two names) when the records'
    sizes agree, and two images when they differ (a class folder's img000.jpg under two labels is another case)."""
    paths = []
    for name, payloads in (("train-00000-of-00002", [b"short", b"a longer one"]),
                           ("train-00001-of-00002", [b"short"])):
        data = b""
        for payload in payloads:
            head, foot = frame(payload)
            data += head + payload + foot
        (tmp_path / name).write_bytes(data)
        paths.append(str(tmp_path / name))
    same = [(0, paths[0], 0, "a.jpg", 1), (0, paths[0], 21, "b.jpg", 1), (0, paths[1], 0, "a.jpg", 1)]
    report = Report()
    check_epoch(report, same, None, "train", paths, 1, classes=1)
    assert details(report)["epoch"] == (False, "1 image(s) present more than once: the same file name, label and "
                                               "size at two places (a shard under two names?), e.g. a.jpg")
    other_size = [(0, paths[0], 0, "a.jpg", 1), (0, paths[0], 21, "a.jpg", 1), (0, paths[1], 0, "b.jpg", 1)]
    report = Report()
    check_epoch(report, other_size, None, "train", paths, 1, classes=1)
    assert report.ok, report.checks


def test_a_label_at_the_class_count_is_outside_and_the_problems_are_joined(shards):
    """Labels - 1 must be below the class count: the label equal to it is outside, and with the histogram's
    problem both are said, joined with '; '."""
    report = Report()
    check_epoch(report, epoch(shards, labels=(1, 3, 1, 2, 2)), MANIFEST, "train", shards, 1, classes=2)
    assert details(report)["labels"] == (False, "1 label(s) outside [0, 2) after the shift (e.g. 2): records "
                                                "0-based, or a wrong class count; class histogram differs from "
                                                "manifest.json")


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


def channels(means, stds, images=4):
    """Batches whose channels have exactly these means and (population) standard deviations: each channel
    alternates mean - std and mean + std."""
    np = pytest.importorskip("numpy")
    signs = np.tile([-1.0, 1.0], images * 8 * 8 // 2).reshape(images, 8, 8, 1)
    return [np.asarray(means) + signs * np.asarray(stds)]


@pytest.mark.parametrize("means,stds,ok", [
    ((0.0, 0.0, 0.0), (1.0, 1.0, 1.0), True),
    ((0.5, -0.5, 0.0), (1.0, 1.0, 1.0), True),
    ((1.0, 0.0, 0.0), (1.0, 1.0, 1.0), False),  # a mean of 1 is not "about 0"
    ((0.0, -1.5, 0.0), (1.0, 1.0, 1.0), False),
    ((0.0, 0.0, 0.0), (0.25, 1.0, 1.0), False),  # the std's range is open at both ends
    ((0.0, 0.0, 0.0), (1.0, 0.5, 1.0), True),
    ((0.0, 0.0, 0.0), (1.0, 1.0, 4.0), False),
    ((0.0, 0.0, 0.0), (1.0, 1.0, 3.5), True),
])
def test_normalisation_holds_each_channel_to_its_bounds_and_says_what_it_found(means, stds, ok):
    report = Report()
    mean, std = check_batches(report, channels(means, stds))
    assert (mean, std) == (list(means), list(stds))
    detail = (f"per-channel mean {', '.join(f'{m:.2f}' for m in means)}, std {', '.join(f'{s:.2f}' for s in stds)}"
              + ("" if ok else " (expected mean ~0, std ~1: raw 0-255 pixels, or normalised twice?)"))
    assert details(report)["normalisation"] == (ok, detail)


def test_the_channel_figures_are_rounded_to_three_decimals():
    mean, std = check_batches(Report(), channels((0.12345, -0.5, 0.0), (1.23456, 1.0, 1.0)))
    assert mean == [0.123, -0.5, 0.0] and std == [1.235, 1.0, 1.0]


def test_batches_name_how_many_repeat_one_image_and_a_batch_of_one_image_repeats_nothing():
    np = pytest.importorskip("numpy")
    rng = np.random.default_rng(1)
    one = rng.normal(0, 1, (1, 8, 8, 3))
    varied = [rng.normal(0, 1, (4, 8, 8, 3)), rng.normal(0, 1, (1, 8, 8, 3))]  # a batch of one image: not repeated
    report = Report()
    check_batches(report, varied)
    assert details(report)["batches"] == (True, "2 batches, images differ within each")
    report = Report()
    check_batches(report, varied + [np.repeat(one, 2, axis=0), np.repeat(one, 4, axis=0)])
    assert details(report)["batches"] == (False, "2 of 4 batch(es) hold one image repeated")


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


@pytest.mark.parametrize("fixed,ok,detail", [
    ([2.0, 1.2, 0.9], True, "loss on 16 fixed images 2.000 -> 0.900"),
    ([2.0, 1.5, 1.1], False, "loss on 16 fixed images 2.000 -> 1.100 (did not halve: labels do not match the images?)"),
    ([], False, "no training steps ran"),
    ([2.0, math.nan], False, "loss on 16 fixed images 2.000 -> nan (did not halve: labels do not match the images?)"),
    ([2.0, 1.0], False, "loss on 16 fixed images 2.000 -> 1.000 (did not halve: labels do not match the images?)"),
    ([0.0, 0.0], False, "loss on 16 fixed images 0.000 -> 0.000 (did not halve: labels do not match the images?)"),
])
def test_overfit_needs_the_loss_to_halve(fixed, ok, detail):
    report = Report()
    check_overfit(report, fixed, "", 16, classes=4)
    assert details(report)["overfit"] == (ok, detail)
    report = Report()
    check_overfit(report, fixed, "training failed after 3 steps: out of memory", 16, classes=4)
    assert details(report)["overfit"] == (False, "training failed after 3 steps: out of memory")


@pytest.mark.parametrize("fixed,ok", [([0.0, 0.0], True), ([0.0004, 0.0], True), ([0.0, 0.01], False),
                                      ([-0.01, 0.0], False), ([2.0, 0.5], False), ([0.0, math.nan], False),
                                      ([0.0, 0.001], False), ([0.0, 0.01, 0.02], False), ([], False)])
def test_overfit_of_one_class_asks_a_loss_of_0_and_says_why(fixed, ok):
    """One class: cross-entropy is 0 for any image, so the loss cannot halve; it must stay 0 (a model with more
    outputs than classes would not give 0), and the report says why no more is asked."""
    report = Report()
    check_overfit(report, fixed, "", 16, classes=1)
    assert report.ok is ok, report.checks
    detail = results(report)["overfit"]["detail"]
    if ok:
        assert detail == ("loss on 16 fixed images 0.000 -> 0.000: 1 class, whose cross-entropy is 0 whatever the "
                          "images (nothing to learn; every label is that class by the labels check)")
    elif fixed:
        assert detail == (f"loss on 16 fixed images {fixed[0]:.3f} -> {fixed[-1]:.3f} (1 class: the loss should be "
                          "0; more model outputs than classes?)"), detail
    else:
        assert detail == "no training steps ran"


def test_slow_training_rates_are_reported_not_rounded_to_zero():
    """ResNet-50 on a CPU trains at well under one image a second: the report shows the figure."""
    from imagenet_build.trainercheck.checks import format_report, result_of

    result = result_of(Report(), split="train", device="cpu", model="resnet50", batch_size=16, steps=2, ranks=1,
                       records=48, pipeline_rate=412.34, train_rate=0.04123, losses=[2.0, 1.9], fixed=[2.0, 0.5],
                       channel_mean=[0, 0, 0], channel_std=[1, 1, 1], started=0.0)
    assert (result["images_per_second"], result["training_images_per_second"]) == (412.3, 0.0412)
    assert "read+decode+augment: 412 images/s; training: 0.0412 images/s" in "\n".join(format_report(result))


@pytest.mark.parametrize("value,json_figure,text", [
    (412.34, 412.3, "412"), (1234.5, 1234.5, "1234"), (99.96, 100.0, "100"), (10.04, 10.0, "10"),
    (9.996, 10.0, "10"), (0.04123, 0.0412, "0.0412"), (123456.0, 123456.0, "123456"),
])
def test_rates_keep_three_significant_digits_below_100_and_whole_numbers_above(value, json_figure, text):
    assert per_second(value) == json_figure and rate(value) == text
