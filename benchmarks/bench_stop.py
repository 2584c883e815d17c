"""How soon a stopped command ends: SIGTERM to convert, verify and trainer-check while their workers are at work,
and the seconds from the signal to the last of their processes gone. The tests hold what a stop must do (exit 1,
one line, nothing left: tests/e2e/test_signals.py); how long it takes is measured here, quiet and loaded.

Each verb runs as a whole process in its own process group, as the user starts it:
  convert        the sample's 1,200 train images (200-400 px) into 32 shards, --workers 2
  verify         --deep of that build, --workers 2
  trainer-check  --framework torch --device cpu --workers 2 (DataLoader worker processes) on it
once its workers are there (three processes in its group), a moment later drawn at random (seeded, 0-2 s), SIGTERM
goes to the main process (`kill PID`) or to the whole group (`kill -TERM -PGID`, as `timeout` sends it), in turn.
Measured: the seconds from the signal until the main process has exited, and until no process of its group is
left. The verbs take turns, --repeats times, on a quiet machine, then with one busy process per core beside them
(`--loaded`, as `scripts/test.sh --loaded` runs the tests). Medians and the slowest are printed.
Usage: python benchmarks/bench_stop.py [--repeats 5] [--seed 0] [--work DIR]
"""

import argparse
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def group_members(pgid):
    """Pids of the live, not zombie, processes of process group `pgid` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z" and int(fields[2]) == pgid:
                found.append(int(entry.name))
    return found


def verb(*args):
    return [sys.executable, "-m", "imagenet_build", *map(str, args)]


def prepare(work):
    """The sample and its build the verbs run on."""
    from imagenet_build.tools.sample_dataset import make_sample

    sample, build = work / "sample", work / "build"
    if not (build / "manifest.json").exists():
        make_sample(sample, classes=8, per_class=150, validation_per_class=2, min_size=200, max_size=400)
        subprocess.run(verb("convert", "--train-dir", sample / "train", "--labels-file", sample / "labels.txt",
                            "--output-dir", build, "--train-shards", 32, "--layout-threads", 4, "--workers", 2),
                       check=True, capture_output=True)
    return sample, build


def commands(sample, build, out):
    return {
        "convert": verb("convert", "--train-dir", sample / "train", "--labels-file", sample / "labels.txt",
                        "--output-dir", out, "--train-shards", 32, "--layout-threads", 4, "--workers", 2,
                        "--overwrite"),
        "verify": verb("verify", build, "--deep", "--workers", 2),
        "trainer-check": verb("trainer-check", build, "--framework", "torch", "--device", "cpu", "--steps", 500,
                              "--workers", 2),
    }


def one_stop(cmd, to_group, moment):
    """(seconds to the main process's exit, seconds to the last process of the group gone, its stderr's lines)."""
    subprocess.run(["sync"], check=True)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    while proc.poll() is None and len(group_members(proc.pid)) < 3:
        time.sleep(0.005)
    time.sleep(moment)
    sent = time.monotonic()
    (os.killpg if to_group else os.kill)(proc.pid, signal.SIGTERM)
    err = proc.communicate()[1]
    exited = time.monotonic() - sent
    while group_members(proc.pid):
        time.sleep(0.005)
    return exited, time.monotonic() - sent, [line for line in err.splitlines() if line.strip()]


def run(cmds, repeats, rng):
    """{verb: [(exited, all gone)]}, the verbs taking turns."""
    times = {name: [] for name in cmds}
    for attempt in range(repeats):
        for name, cmd in cmds.items():
            exited, gone, lines = one_stop(cmd, attempt % 2 == 1, rng.uniform(0, 2))
            if lines[-1:] != [line for line in lines if line.startswith("error: ")][-1:]:
                print(f"  {name}: stderr {lines}", file=sys.stderr)
            times[name].append((exited, gone))
    return times


def report(title, times):
    print(title)
    for name, pairs in times.items():
        exited, gone = [p[0] for p in pairs], [p[1] for p in pairs]
        print(f"  {name:14s} exited: median {statistics.median(exited):.2f} s, slowest {max(exited):.2f} s; "
              f"every process gone: median {statistics.median(gone):.2f} s, slowest {max(gone):.2f} s "
              f"({len(pairs)} stops)")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", help="scratch folder (default: a temporary one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(args.work or scratch)
        sample, build = prepare(work)
        cmds = commands(sample, build, work / "out")
        rng = random.Random(args.seed)
        report(f"quiet (nothing of this benchmark beside it; load average {os.getloadavg()[0]:.1f}):",
               run(cmds, args.repeats, rng))
        burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)]
        try:
            report(f"loaded ({len(burners)} busy processes beside it; load average {os.getloadavg()[0]:.1f}):",
                   run(cmds, args.repeats, rng))
        finally:
            for burner in burners:
                burner.kill()
                burner.wait()


if __name__ == "__main__":
    main()
