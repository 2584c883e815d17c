"""cli/stop.py: a stop signal Python swallowed (raised inside a __del__) or a library caught still stops the command,
and one raised again after the stop got under way is dropped."""

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


# A verb's work during which SIGTERM comes and a library on the way catches the raise (as `except BaseException`
# does), so the work runs on to its end: the verb is `sample OUT --json`, whose work is made to do so here
CAUGHT_STOP = (
    "import os, signal, sys\n"
    "import imagenet_build.tools.sample_dataset as sample\n"
    "made = sample.make_sample\n"
    "def make_sample(*args, **kwargs):\n"
    "    try:\n"
    "        os.kill(os.getpid(), signal.SIGTERM)\n"
    "        sum(range(100000))  # the handler raises here\n"
    "    except BaseException:\n"
    "        pass  # a library that swallows it\n"
    "    return made(*args, **kwargs)\n"
    "sample.make_sample = make_sample\n"
    "from imagenet_build.cli import cli\n"
    "cli.main(['sample', sys.argv[1], '--json'], prog_name='imagenet-build')\n"
)


def test_a_stop_whose_raise_a_library_caught_ends_as_interrupted_not_as_the_result(tmp_path):
    """trainer-check stopped with SIGTERM to its group once ran all its 500 steps and printed its report, exit 0
    (the raise lost inside a library's import): a verb that ran past a stop ends `error: interrupted`, exit 1,
    its --json document the error's, never its result."""
    import json

    result = subprocess.run([sys.executable, "-c", CAUGHT_STOP, str(tmp_path / "s")], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert result.stderr == "error: interrupted\n"
    assert json.loads(result.stdout)["error"] == "interrupted"


def test_every_progress_bars_step_looks_for_a_lost_stop():
    """A long loop (trainer-check's training steps, a read epoch, convert's shards) steps a progress bar: a stop
    whose raise was lost is raised there, shown or not, so the loop does not run on to its end; once the stop is
    under way (the ending being written), the bars step on."""
    import io
    import threading

    import pytest
    from tqdm import tqdm

    from imagenet_build.infra.errors import Interrupted
    from imagenet_build.infra.workers import _looking_bar, progress_bar

    bars = [progress_bar(None, 0, "train", "step"), _looking_bar(tqdm)(total=None, file=io.StringIO())]
    try:
        for bar in bars:
            bar.update(1)
        Interrupted.requested = True
        raised: list[BaseException] = []

        def step_in_a_thread():  # a result watcher's: the stop is the main thread's to raise (here: a traceback)
            try:
                for bar in bars:
                    bar.update(1)
            except BaseException as e:
                raised.append(e)

        stepped = threading.Thread(target=step_in_a_thread)
        stepped.start()
        stepped.join()
        assert raised == []
        for bar in bars:
            with pytest.raises(Interrupted):
                bar.update(1)
        Interrupted.stopping = True
        for bar in bars:
            bar.update(1)
    finally:
        Interrupted.requested = Interrupted.stopping = False
        for bar in bars:
            bar.close()
