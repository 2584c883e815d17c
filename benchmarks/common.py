"""What every benchmark here shares: generated inputs, timing whole processes, images/s of a pipeline."""

import io
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path


def bench_parser(doc):
    """The options every convert benchmark takes: how many images, repeats, shards, and a scratch folder."""
    import argparse

    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=10000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--shards", type=int, default=128)
    parser.add_argument("--work", help="scratch folder (default: a temporary one)")
    return parser


def kept_inputs(work, images, classes=100):
    """`work/inputs` made by make_inputs once, and reused by later runs of the benchmark."""
    inputs = Path(work) / "inputs"
    if not (inputs / "labels.txt").exists():
        shutil.rmtree(inputs, ignore_errors=True)
        make_inputs(inputs, images, classes)
    return inputs


def make_inputs(root, images, classes):
    """`images` JPEGs in `classes` folders; 64 distinct pictures reused (convert never decodes them)."""
    from PIL import Image

    from imagenet_build.catalog.classes import DEFAULT_LABELS_FILE, read_labels_file

    rng = random.Random(0)
    pictures = []
    for _ in range(64):
        w, h = rng.choice([(500, 375), (500, 333), (375, 500), (500, 400), (640, 480)])
        noise = Image.frombytes("RGB", (w // 4, h // 4), rng.randbytes(w * h * 3 // 16)).resize((w, h))
        out = io.BytesIO()
        noise.save(out, "JPEG", quality=90)
        pictures.append(out.getvalue())
    synsets = read_labels_file(DEFAULT_LABELS_FILE)[:classes]
    for c, synset in enumerate(synsets):
        folder = root / "train" / synset
        folder.mkdir(parents=True)
        for k in range(images // classes):
            (folder / f"{synset}_{k}.JPEG").write_bytes(pictures[(c * 7 + k) % len(pictures)])
    (root / "labels.txt").write_text("".join(s + "\n" for s in synsets))
    total = sum(p.stat().st_size for p in (root / "train").rglob("*.JPEG"))
    return total


def compiled():
    """The package's bytecode written once, as an installed package has it, so that no timed run pays for
    compiling it (PYTHONDONTWRITEBYTECODE would otherwise make every run compile every module)."""
    import os

    import imagenet_build

    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-m", "compileall", "-q", *imagenet_build.__path__], check=True, env=env,
                   stdout=subprocess.DEVNULL)


def remove(paths):
    """Remove a path or each of a list of paths (folders with what they hold), where they exist."""
    for path in [paths] if isinstance(paths, (str, Path)) else paths:
        path = Path(path)
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


def measure(cmd, clear=(), cold=False, env=None):
    """(wall seconds, CPU seconds of the process and all its workers, peak RSS in MB of the largest
    process) of `cmd` as a whole process, run through a small probe (a child forked from a large
    benchmark process would report that one's RSS).

    The paths in `clear` are removed first, then `sync` (so one run's writeback is not paid by the
    next); cold also drops the page cache (root only), so the inputs come from the disk.
    """
    remove(clear)
    subprocess.run(["sync"], check=True)
    if cold:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    probe = (
        "import resource, subprocess, sys, time; t = time.perf_counter(); "
        "r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE); "
        "s = time.perf_counter() - t; u = resource.getrusage(resource.RUSAGE_CHILDREN); "
        "sys.stderr.write(r.stderr.decode()[-2000:]); "
        "print(s, u.ru_utime + u.ru_stime, u.ru_maxrss / 1024); sys.exit(r.returncode)"
    )
    result = subprocess.run([sys.executable, "-c", probe, *map(str, cmd)], capture_output=True, text=True, env=env)
    if result.returncode:
        raise SystemExit(f"failed: {' '.join(map(str, cmd))}\n{result.stderr}")
    wall, cpu, rss = map(float, result.stdout.split()[-3:])
    return wall, cpu, rss


def timed(cmd, clear=(), cold=False):
    """(wall seconds, peak RSS in MB of the largest process) of `cmd`, as measure() runs it."""
    wall, _, rss = measure(cmd, clear, cold)
    return wall, rss


def alternate(commands, repeats, clear):
    """Each command `repeats` times, the commands taking turns (so drift hits them alike).

    clear(name) names what to remove before that command's run, and after it (untimed): one run's
    output left in the page cache would push the next commands' inputs out of it (seven 1.1 GB
    inputs and seven outputs fill a 24 GB machine's memory). Returns ({name: [seconds]},
    {name: [peak RSS MB]}).
    """
    runs = {name: [] for name in commands}
    rss = {name: [] for name in commands}
    for _ in range(repeats):
        for name, cmd in commands.items():
            seconds, peak = timed(cmd, clear(name))
            remove(clear(name))
            runs[name].append(seconds)
            rss[name].append(peak)
    return runs, rss


def fresh_memory_seconds(gb=1):
    """CPU seconds to touch `gb` GB of memory after it has lain free for 3 s: ~0.25 s per GB on bare
    metal; on a virtual machine that hands free memory back to its host (Linux's free page reporting,
    2 s after a page is freed) several times that, paid by whatever writes into that memory next."""
    import mmap

    time.sleep(3)
    size = gb << 30
    started = time.process_time()
    memory = mmap.mmap(-1, size)
    for offset in range(0, size, 4096):
        memory[offset] = 1
    memory.close()
    return time.process_time() - started


def images_per_second(next_batch, batch_size, batches):
    """Images/s of a pipeline over `batches` calls of next_batch(), after one warm-up call."""
    next_batch()
    started = time.perf_counter()
    for _ in range(batches):
        next_batch()
    return batches * batch_size / (time.perf_counter() - started)


def start_s3():
    """moto's S3 server on a free loopback port, the AWS_* variables pointing at it, bucket 'bench'."""
    import os
    import socket
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            urllib.request.urlopen(endpoint, timeout=1)
            break
        except OSError:
            time.sleep(0.1)
    os.environ.update(AWS_ENDPOINT_URL=endpoint, AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench",
                      AWS_DEFAULT_REGION="us-east-1")
    import boto3

    boto3.client("s3").create_bucket(Bucket="bench")
    return server
