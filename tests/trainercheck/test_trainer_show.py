"""trainer-check --show through each reader: the picture's first row is the first batch the model was fed,
un-normalised, under the labels it was trained with; its last row the overfit check's fixed subset.

What the model was fed is taken from the model itself (DALI: Keras' train_on_batch; PyTorch: a forward
pre-hook), so the picture is held to the batches training used, not to a second reading of the shards.
"""

import sys

import numpy as np
import pytest
from PIL import Image

from helpers import trainer_report
from imagenet_build.format.folder_contents import is_trainer_picture
from imagenet_build.trainercheck.show_grid import read_legend, unnormalise

MEAN, STD = (120.0, 110.0, 100.0), (60.0, 55.0, 50.0)  # not the defaults: the picture takes the reader's
FRAMEWORKS = {
    "dali-tf": ("nvidia.dali.plugin.tf", ("--framework", "dali-tf", "--device", "cpu", "--steps", 3)),
    "dali-torch": ("nvidia.dali.plugin.pytorch", ("--framework", "dali-torch", "--device", "cpu", "--steps", 3)),
    "torch": ("torchvision", ("--framework", "torch", "--device", "cpu", "--steps", 3)),
}
pytestmark = pytest.mark.filterwarnings("ignore:The image decoding:DeprecationWarning")


def spy_on_dali_models(monkeypatch):
    """Each Keras model trainer-check builds, in order: [(images, labels)] of its first training steps."""
    from imagenet_build.trainercheck import dali_tf

    models, build = [], dali_tf.build_model

    def spied(name, classes):
        model, fed = build(name, classes), []
        models.append(fed)
        train_on_batch = model.train_on_batch

        def train(images, labels, *args, **kwargs):
            fed.append((np.array(images), np.array(labels).reshape(-1)))
            return train_on_batch(images, labels, *args, **kwargs)

        model.train_on_batch = train
        return model

    monkeypatch.setattr(dali_tf, "build_model", spied)
    return models


def spy_on_torch_models(monkeypatch, folder):
    """The same for the PyTorch models (images from a forward pre-hook). The labels of a batch do not reach
    the model: they are read again, the reader's epoch 0 shuffled (training) and unshuffled (the subset)."""
    from imagenet_build.readers.torch_dataset import RecordDataset
    from imagenet_build.trainercheck import torch_check
    from imagenet_build.trainercheck.torch_loader import loader

    models, build = [], torch_check.build_model

    def spied(name, classes, device):
        model, fed = build(name, classes, device), []
        labels = next(iter(loader(RecordDataset(folder, decode=False, shuffle=not models), 16, 0)))
        models.append(fed)
        model.register_forward_pre_hook(lambda _, inputs: fed.append(
            (inputs[0].detach().permute(0, 2, 3, 1).float().cpu().numpy(), labels["label"].numpy())))
        return model

    monkeypatch.setattr(torch_check, "build_model", spied)
    return models


def spy_on_dali_torch_training(monkeypatch):
    """The same for DALI's PyTorch iterator: each training run's batches as its loop was handed them (the images
    and labels the iterator delivered, as the model got them)."""
    from imagenet_build.trainercheck import dali_torch, torch_training

    models, train = [], torch_training.train

    def spied(model, batches, *args, **kwargs):
        fed = []
        models.append(fed)

        def recorded():
            for images, labels in batches():
                fed.append((images.detach().permute(0, 2, 3, 1).float().cpu().numpy(), labels.numpy()))
                yield images, labels

        return train(model, recorded, *args, **kwargs)

    monkeypatch.setattr(dali_torch, "train", spied)  # the overfit check's loop
    monkeypatch.setattr(torch_training, "train", spied)  # the training run's, through train_timed
    return models


SPIES = {"dali-tf": lambda monkeypatch, folder: spy_on_dali_models(monkeypatch),
         "dali-torch": lambda monkeypatch, folder: spy_on_dali_torch_training(monkeypatch),
         "torch": spy_on_torch_models}


def test_every_trainer_is_held_to_its_picture():
    """A reader trainer-check runs through (the registry) without its row here would draw untested."""
    from imagenet_build.trainercheck.trainers import trainers

    assert sorted(FRAMEWORKS) == sorted(SPIES) == [reader.name for reader in trainers()]


@pytest.mark.slow
@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_the_picture_shows_what_the_model_was_fed(converted, tmp_path, monkeypatch, framework):
    module, args = FRAMEWORKS[framework]
    if "torch" in framework:
        sys.modules.setdefault("triton", None)  # tests/readers/test_torch.py: torch without triton beside TensorFlow
    pytest.importorskip(module)
    models = SPIES[framework](monkeypatch, converted)
    path = tmp_path / "batches.png"
    code, report, failed = trainer_report(converted, *args, "--mean", *MEAN, "--std", *STD, "--show", path)
    assert code == 0 and not failed and report["show"] == str(path), report
    legend = read_legend(path)
    assert is_trainer_picture(str(path))  # what verify and convert keep in a build folder under any name
    training, subset = models  # the training run's model, then the overfit check's
    assert [row["title"] for row in legend["rows"]] == [
        "training step 1: 8 of 16 images", "training step 2: 8 of 16 images", "training step 3: 8 of 16 images",
        "the overfit check's fixed subset (evaluation crop): 8 of 16 images"]
    with Image.open(path) as picture:
        pixels = np.asarray(picture.convert("RGB"))
    for row, (images, labels) in zip((legend["rows"][0], legend["rows"][3]), (training[0], subset[0])):
        expected = unnormalise(images, MEAN, STD)
        for k, shown in enumerate(row["tiles"]):
            x, y, w, h = shown["box"]
            assert (w, h) == (224, 224)
            assert np.abs(pixels[y:y + h, x:x + w].astype(int) - expected[k]).max() <= 1, (row["title"], k)
            assert shown["caption"].split()[0] == str(labels[k]), (row["title"], k)
    tench = next(t["caption"] for row in legend["rows"] for t in row["tiles"] if t["caption"].startswith("0 "))
    assert tench == "0 n01440764\ntench, Tinca tinca"  # the sample's first class, as the shipped metadata says
