"""What each verb's --help says: convert's first paragraph names every copy --from reads, the options' defaults."""

import pytest

from conftest import run_cli
from imagenet_build.sources.copies import sample_kinds

# each copy `sample --layout` knows -> how convert --help's first paragraph names it
CONVERT_HELP_NAMES = {"ilsvrc": "the ILSVRC2012 archives or the folders extracted from them", "kaggle": "Kaggle's zip",
                      "hf": "Hugging Face's .tar.gz", "hf-parquet": "or parquet files", "blurred": "blurred release",
                      "wds": "WebDataset shards", "imagenet-v2": "ImageNetV2", "imagenet-a": "ImageNet-A",
                      "imagenet-r": "-R", "imagenet-sketch": "-Sketch"}


def test_convert_help_says_first_what_from_reads():
    assert sorted(CONVERT_HELP_NAMES) == sorted(sample_kinds())  # a new copy is named there, and here
    result = run_cli("convert", "--help")
    first = " ".join(result.output.split("\n\n")[1].split())
    assert first.startswith("Convert any copy of ImageNet into shuffled, sharded TFRecords"), first
    for name in CONVERT_HELP_NAMES.values():
        assert name in first, (name, first)


@pytest.mark.parametrize("verb,fragment", [
    ("convert", "Processes that write shards; 0 (the default): one per core."),
    ("verify", "Processes; 0 (the default): one per core."),
    ("index", "Processes; 0 (the default): one per core."),
    ("verify", 'Print {"ok", "problems", "warnings", "summary"} as JSON.'),
])
def test_help_says_what_it_should(verb, fragment):
    result = run_cli(verb, "--help")
    assert result.exit_code == 0 and fragment in " ".join(result.stdout.split()), result.stdout
