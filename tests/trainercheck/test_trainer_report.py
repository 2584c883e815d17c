"""trainer-check's result and report (trainercheck/checks.py): every figure of a run, the readable report line by
line, every reader taken through the same checks in one order by run_checks, and --show's picture, on synthetic
epochs without a pipeline (the checks themselves: test_trainer_checks.py)."""

import time
import types

import pytest

from imagenet_build.infra.errors import BuildError
from imagenet_build.trainercheck.checks import (
    Report,
    format_report,
    result_of,
)
from synthetic_epochs import MANIFEST, epoch, two_shards


@pytest.fixture
def shards(tmp_path):
    return two_shards(tmp_path)


RESULT = dict(split="validation", device="cpu", model="small", batch_size=16, steps=3, ranks=2, records=48,
              pipeline_rate=250.0, train_rate=31.25, losses=[2.5, 2.0, 1.5], fixed=[2.0, 1.0, 0.25],
              channel_mean=[0.01, -0.02, 0.03], channel_std=[1.0, 0.99, 1.01])


def test_the_result_holds_every_figure_of_the_run(monkeypatch):
    from imagenet_build.trainercheck import checks

    monkeypatch.setattr(checks, "time", types.SimpleNamespace(monotonic=lambda: 1012.34))  # the run's end, fixed
    report = Report()
    report.add("epoch", True, "48 records")
    result = result_of(report, **RESULT, started=1000.0)
    assert result == {"ok": True, "checks": [{"name": "epoch", "ok": True, "detail": "48 records"}],
                      "split": "validation", "device": "cpu", "model": "small", "batch_size": 16, "steps": 3,
                      "ranks": 2, "records": 48, "images_per_second": 250.0, "training_images_per_second": 31.2,
                      "loss": {"first": 2.5, "last": 1.5}, "overfit_loss": {"first": 2.0, "last": 0.25},
                      "channel_mean": [0.01, -0.02, 0.03], "channel_std": [1.0, 0.99, 1.01], "seconds": 12.3}
    empty = result_of(report, **dict(RESULT, losses=[], fixed=[]), started=1000.0)
    assert empty["loss"] == empty["overfit_loss"] == {"first": None, "last": None}


def test_the_readable_report_has_a_line_for_each_check_the_rates_the_extras_and_the_verdict():
    report = Report()
    report.add("epoch", True, "48 records over 2 rank(s)")
    report.add("labels", False, "class histogram differs from manifest.json")
    report.add("loss", False, "no training steps ran")
    result = result_of(report, **RESULT, started=time.monotonic())
    assert format_report(result) == [
        "trainer-check validation on cpu (small, batch 16, 3 steps, 2 rank(s)): 48 records",
        "  ok   epoch          48 records over 2 rank(s)",
        "  FAIL labels         class histogram differs from manifest.json",
        "  FAIL loss           no training steps ran",
        "  DALI read+decode+augment: 250 images/s; training: 31.2 images/s",
        "FAILED: labels, loss"]
    result = result_of(Report(), **RESULT, started=time.monotonic())
    result.update(reader="PyTorch reader (imagenet_build.torch)", show="/b/trainer-check.png",
                  notes=["--workers 9: 2 used"],
                  tf_data={"images_per_second": 95.25, "channel_mean": [0.1, 0.2, 0.3], "channel_std": [1.1, 1, 0.9]})
    assert format_report(result) == [
        "trainer-check validation on cpu (small, batch 16, 3 steps, 2 rank(s)): 48 records",
        "  PyTorch reader (imagenet_build.torch) read+decode+augment: 250 images/s; training: 31.2 images/s",
        "  tf.data same augmentation: 95.2 images/s; channel mean [0.1, 0.2, 0.3] std [1.1, 1, 0.9] "
        "(DALI: mean [0.01, -0.02, 0.03] std [1.0, 0.99, 1.01])",
        "  the batches as fed to the model: /b/trainer-check.png",
        "note: --workers 9: 2 used",
        "OK: the data trains"]


class FakeReader:
    """A reader's steps as trainer-check takes them, without a pipeline: the epoch of `shards`, normalised
    batches, a loss that falls; `fails` makes training stop with that reason, `overfit_fails` the overfit's;
    `fixed`: the overfit's losses."""

    name = "the fake reader"

    def __init__(self, seen, fails="", overfit_fails="", fixed=(2.0, 0.5)):
        self.seen, self.fails, self.asked = seen, fails, []
        self.overfit_fails, self.fixed = overfit_fails, list(fixed)

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
        return self.fixed, self.overfit_fails, 4


def test_every_reader_is_taken_through_the_same_checks_in_one_order(shards):
    """run_checks is the one sequence both trainer-check paths use: a reader supplies its steps, the checks,
    their order and the report are the same for all (a reader that stops training fails `loss`)."""
    from imagenet_build.trainercheck.checks import Settings, run_checks

    settings = Settings("out", "train", "cpu", "small", batch_size=1, steps=2, num_shards=1)
    reader = FakeReader(epoch(shards))
    result = run_checks(reader, settings, MANIFEST, shards, started=0.0)
    assert [c["name"] for c in result["checks"]] == ["epoch", "ranks", "labels", "batches", "normalisation",
                                                      "loss", "overfit"]
    assert result["ok"], result["checks"]
    assert reader.asked == ["epoch", ("sample", 5), ("train", 2), ("overfit", 2)]  # classes: the labels seen
    assert results_of(result)["overfit"]["detail"] == "loss on 4 fixed images 2.000 -> 0.500"
    assert (result["records"], result["loss"], result["overfit_loss"]) == (5, {"first": 2.0, "last": 1.5},
                                                                           {"first": 2.0, "last": 0.5})
    stopped = run_checks(FakeReader(epoch(shards), fails="training stopped at step 2"), settings, MANIFEST, shards,
                         started=0.0)
    assert not stopped["ok"] and results_of(stopped)["loss"]["detail"] == "training stopped at step 2"
    with pytest.raises(BuildError, match="^out: the fake reader read no train records at all$"):
        run_checks(FakeReader([]), settings, MANIFEST, shards, started=0.0)


def test_run_checks_hands_each_check_the_run_and_the_reader_what_it_was_asked(shards):
    """The epoch check gets the manifest, split, ranks and the reader's name; the classes are the manifest's
    (else the highest label); the batches sampled are an epoch's, 4 to 20; the overfit check gets the reader's
    failure, count and the classes; the result the run's settings and the batches' statistics."""
    from imagenet_build.trainercheck.checks import Settings, run_checks

    settings = Settings("out", "train", "cpu", "small", batch_size=2, steps=3, num_shards=2)
    reader = FakeReader(epoch(shards, ranks=2)[:4], overfit_fails="training failed after 1 steps: boom")
    result = run_checks(reader, settings, dict(MANIFEST, num_classes=7), shards, started=0.0)
    assert reader.asked == ["epoch", ("sample", 4), ("train", 7), ("overfit", 7)]
    checks = results_of(result)
    assert checks["epoch"]["detail"] == ("epoch has 4 records, manifest.json says 5; the fake reader delivered 4 "
                                         "records, the shards hold 5 (an index drops or repeats some)")
    assert checks["ranks"]["detail"] == "2 rank(s), disjoint"
    assert checks["labels"]["detail"] == "class histogram differs from manifest.json"
    assert checks["overfit"] == {"name": "overfit", "ok": False, "detail": "training failed after 1 steps: boom"}
    assert {k: result[k] for k in ("split", "device", "model", "batch_size", "steps", "ranks", "records")} == {
        "split": "train", "device": "cpu", "model": "small", "batch_size": 2, "steps": 3, "ranks": 2, "records": 4}
    assert len(result["channel_mean"]) == len(result["channel_std"]) == 3
    assert all(abs(m) < 0.2 for m in result["channel_mean"]) and all(0.8 < s < 1.2 for s in result["channel_std"])
    many = [(0, file, offset, name, label) for _ in range(5) for _, file, offset, name, label in epoch(shards)]
    reader = FakeReader(many)
    run_checks(reader, settings._replace(batch_size=1), MANIFEST, shards, started=0.0)
    assert reader.asked[1] == ("sample", 20)  # 25 batches an epoch: 20 looked at
    epoch_of_one = [(0, file, offset, name, 1) for _, file, offset, name, _ in epoch(shards)]
    one = run_checks(FakeReader(epoch_of_one, fixed=(0.0, 0.0)), settings, {"num_classes": 1}, shards, started=0.0)
    assert results_of(one)["overfit"]["ok"], one["checks"]  # 1 class: handed to the overfit check


def results_of(result):
    return {c["name"]: c for c in result["checks"]}


class ShowingReader(FakeReader):
    """FakeReader whose training loop hands its batches to --show's capture, as the real readers' loops do."""

    def __init__(self, seen, fails=""):
        from imagenet_build.trainercheck.show_grid import BatchCapture

        super().__init__(seen, fails)
        self.capture = BatchCapture((0, 0, 0), (1, 1, 1))

    def train(self, classes):
        import numpy as np

        self.capture.step(np.full((2, 8, 8, 3), 100.0, dtype=np.float32), np.array([0, 1]))
        return super().train(classes)


def test_the_picture_is_drawn_whatever_the_checks_found(shards, tmp_path):
    """--show: the picture is written when the checks pass and when they fail (then it is most wanted), its
    path in the result and in the readable report."""
    from imagenet_build.trainercheck.checks import Settings, format_report, run_checks
    from imagenet_build.trainercheck.show_grid import read_legend

    for fails in ("", "training stopped at step 2"):
        picture = tmp_path / f"batches{len(fails)}.png"
        settings = Settings("out", "train", "cpu", "small", 1, 2, 1, show=str(picture))
        result = run_checks(ShowingReader(epoch(shards), fails), settings, dict(MANIFEST, synsets=["n01", "n02"]),
                            shards, started=0.0)
        assert result["ok"] == (not fails) and result["show"] == str(picture)
        assert f"  the batches as fed to the model: {picture}" in format_report(result)
        legend = read_legend(picture)
        assert [row["title"] for row in legend["rows"]] == ["training step 1: 2 images"]
        assert [tile["caption"] for tile in legend["rows"][0]["tiles"]] == ["0 n01", "1 n02"]  # the manifest's


def test_the_picture_is_headed_with_the_reader_split_and_device(shards, tmp_path):
    from imagenet_build.trainercheck.checks import Settings, run_checks

    pictures = []
    for name in ("DALI", "the PyTorch reader"):
        reader = ShowingReader(epoch(shards))
        reader.name = name
        pictures.append(tmp_path / f"{len(pictures)}.png")
        run_checks(reader, Settings("out", "train", "cpu", "small", 1, 2, 1, show=str(pictures[-1])), MANIFEST,
                   shards, started=0.0)
    assert pictures[0].read_bytes() != pictures[1].read_bytes()  # the same batches: only the heading differs


@pytest.mark.slow
@pytest.mark.parametrize("tty", [True, False], ids=["terminal", "pipe"])
def test_trainer_check_says_what_it_does_on_a_terminal_and_nothing_in_a_log(converted, tty):
    """On a terminal, trainer-check was silent while its libraries loaded and between its bars (14-35 s), then
    printed its header with its results: it says, as each begins, what it is doing. Into a pipe (a log, CI) it
    prints its report alone, as before."""
    from conftest import Run
    from imagenet_build.trainercheck.trainers import TRAINERS, missing

    if missing(TRAINERS["torch"]):
        pytest.skip("needs the torch extra")
    with Run("trainer-check", converted, "--framework", "torch", "--device", "cpu", "--steps", 3, tty=tty) as run:
        code, out, err = run.finish()
    assert code == 0, err
    notes = [line.strip() for line in err.replace("\r", "\n").splitlines() if line.startswith("trainer-check")]
    if not tty:
        assert err == "" and out.startswith("trainer-check train through torch on cpu"), err
        return
    assert notes == [f"trainer-check {converted}: starting PyTorch reader (imagenet_build.torch); its libraries "
                     "take seconds to load",
                     "trainer-check: one epoch of the train split through the PyTorch reader, 1 rank(s)",
                     "trainer-check: decoding and augmenting 4 batches to look at",
                     "trainer-check: training small for 3 steps, batch 16",
                     "trainer-check: learning a fixed batch (overfit)"], err
    assert out.splitlines()[-1] == "OK: the data trains"
