"""trainercheck/torch_loader.py: trainer-check's DataLoader workers, stopped while the
parent fetches a batch from one."""

import subprocess
import sys

import pytest

from run_helpers import torch_or_skip

torch_or_skip()

# A parent stopped (as SIGTERM and Ctrl-C stop a verb: a KeyboardInterrupt where it is) while it fetches the file
# descriptor of a batch's tensors from a worker's resource sharer: on the second fetch, just connected, where its
# socket is closed on the way out (multiprocessing.connection.SocketClient's `with`), the worker mid-handshake.
STOPPED_MID_FETCH = """
import socket, sys, time, torch
from imagenet_build.trainercheck.torch_loader import batches

connects = []
real = socket.socket.connect

def stopped_once_connected(sock, address):
    real(sock, address)
    connects.append(address)
    if len(connects) == 2:
        raise KeyboardInterrupt

socket.socket.connect = stopped_once_connected

class Tensors(torch.utils.data.Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, n):
        return {"image": torch.zeros(4096), "label": n}

if sys.argv[1] == "trainer-check":
    epoch = batches(Tensors(), 4, 2)
else:  # PyTorch's own loader, as a user's training script makes it
    epoch = iter(torch.utils.data.DataLoader(Tensors(), batch_size=4, num_workers=2))
try:
    for _ in epoch:
        pass
except KeyboardInterrupt:
    print("stopped", len(connects), flush=True)
    time.sleep(1)  # what a worker prints of it comes now (PyTorch's own loader ends its workers below)
del epoch
"""


@pytest.mark.parametrize("loader", ["trainer-check", "pytorch"])
def test_a_parent_stopped_while_it_fetches_a_batch_leaves_its_workers_silent(loader):
    """A stop that came while trainer-check fetched a batch's tensors from a DataLoader worker made the worker's
    resource sharer print a ConnectionResetError traceback (`resource_sharer.py, line 138, in _serve`) before
    `error: interrupted`: the parent hung up on it mid-handshake. The parent reports its own stop; trainer-check's
    workers print nothing of it. PyTorch's own loader, stopped there, still prints it: the stop came where it did."""
    result = subprocess.run([sys.executable, "-c", STOPPED_MID_FETCH, loader], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0 and result.stdout == "stopped 2\n", result.stderr
    if loader == "trainer-check":
        assert result.stderr == ""
    else:
        assert "resource_sharer.py" in result.stderr and "in _serve" in result.stderr, result.stderr
