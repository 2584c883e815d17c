"""cli/stop.py: a stop signal Python swallowed (raised inside a __del__) still stops the command, and one raised
again after the stop got under way is dropped."""

import subprocess
import sys

# A program whose SIGTERM comes while Python runs a __del__ (Finalised()), under the CLI's stop handling
SWALLOWED_STOP = (
    "import os, signal, time\n"
    "from imagenet_build.cli import stop\n"
    "class Finalised:\n"
    "    def __del__(self):\n"
    "        os.kill(os.getpid(), signal.SIGTERM)\n"
    "        sum(range(100000))  # the handler runs here, inside __del__\n"
    "restore = stop.stop_on_signals()\n"
)


def test_a_stop_signal_whose_raise_python_swallowed_still_stops_the_command():
    """A signal that arrives while Python runs a __del__ (or an at-fork hook: trainer-check forks its
    DataLoader workers several times) raises there, where Python prints the exception and drops it:
    a Ctrl-C at that moment let trainer-check run on to its end and exit 0."""
    code = SWALLOWED_STOP + (
        "try:\n"
        "    Finalised()\n"
        "    time.sleep(600)  # woken by the raise, as the signal woke it: else the run times out\n"
        "    print('ran on', flush=True)\n"
        "except KeyboardInterrupt:\n"
        "    print('stopped', flush=True)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.stdout == "stopped\n" and result.stderr == "", result.stderr


def test_a_swallowed_stop_raised_again_after_the_stop_got_under_way_is_dropped():
    """The swallowed stop is raised again a moment later (above); when the stop got under way meanwhile (an error
    the same signal set off: a DataLoader worker it ended), that raise came after the command had put Python's
    handlers back, as a KeyboardInterrupt traceback at exit ("Exception ignored in: <module 'threading'>")."""
    code = SWALLOWED_STOP + (
        "Finalised()\n"
        "stop.stopping()  # the command ends on another error the signal set off\n"
        "restore()\n"
        "time.sleep(0.5)\n"
        "print('ended', flush=True)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout == "ended\n" and result.stderr == "", result.stderr
