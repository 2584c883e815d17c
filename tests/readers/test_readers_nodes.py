"""Every reader the project ships (the registry's, each way test_readers.py reads it: the PyTorch datasets and
trainer-check's epochs, tf.data's make_dataset, the Grain data source, DALI's pipelines) given a build with one of
its files replaced by a FIFO (a read would wait for a writer forever) or a link to /dev/zero (a read would never
end): refused before a byte is read, in the tool's one line naming the file, within a bound only a hang reaches,
the node untouched. The command line's verbs meet the same in tests/cli/test_builds_read.py."""

import os

import pytest
from test_readers import READERS

from helpers import SHARD
from hostile_paths import NODES, bounded, node_state
from imagenet_build.infra.errors import BuildError

FILES = ["manifest.json", SHARD, f"dali_idx/{SHARD}.idx"]
KINDS = ["a FIFO", "a link to /dev/zero"]


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("name", FILES)
@pytest.mark.parametrize("kind", KINDS)
def test_every_reader_refuses_what_is_no_file_of_a_build(build, reader, name, kind):
    read, _ = READERS[reader]
    os.remove(build / name)
    NODES[kind](build / name)
    before = node_state(build / name)
    with bounded(), pytest.raises(BuildError) as refused:
        read(build)
    message = str(refused.value)
    assert "\n" not in message and f"{build / name}: not a regular file" in message, message
    assert node_state(build / name) == before
