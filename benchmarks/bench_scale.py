"""The cost of scaling out: Beam's DirectRunner against the local runner, and S3 against local disk.

On N generated ImageNet-sized images (or --work's), as whole processes, alternating, `sync` first:
  local         imagenet-build convert --output-dir DIR            (worker processes)
  beam-direct   imagenet-build convert --output-dir DIR --runner beam   (DirectRunner)
  s3            imagenet-build convert --output-dir s3://...       (moto's S3 server on loopback)
Usage: python benchmarks/bench_scale.py [--images 2000] [--repeats 3]
"""

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_convert import make_inputs  # noqa: E402


def start_s3():
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


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--shards", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--work", help="scratch folder (default: a temporary one)")
    args = parser.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="ib-bench-scale-"))
    inputs = work / "scale-inputs"
    if not (inputs / "labels.txt").exists():
        make_inputs(inputs, args.images, 20)
    server = start_s3()
    try:
        base = [sys.executable, "-m", "imagenet_build", "convert", "--train-dir", str(inputs / "train"),
                "--labels-file", str(inputs / "labels.txt"), "--train-shards", str(args.shards), "--overwrite"]
        commands = {
            "local": base + ["--output-dir", str(work / "scale-out")],
            "beam-direct": base + ["--output-dir", str(work / "scale-out"), "--runner", "beam"],
            "s3": base + ["--output-dir", "s3://bench/out"],
        }
        runs = {name: [] for name in commands}
        for _ in range(args.repeats):
            for name, cmd in commands.items():
                shutil.rmtree(work / "scale-out", ignore_errors=True)
                subprocess.run(["sync"], check=True)
                started = time.perf_counter()
                result = subprocess.run(cmd, capture_output=True, text=True)
                if result.returncode:
                    raise SystemExit(result.stderr[-2000:])
                runs[name].append(time.perf_counter() - started)
    finally:
        server.terminate()
    images = sum(1 for _ in (inputs / "train").rglob("*.JPEG"))
    med = {name: statistics.median(r) for name, r in runs.items()}
    print(f"{images} images, {args.shards} shards, {os.cpu_count()} cores, {args.repeats} runs each (median)")
    for name, r in runs.items():
        print(f"  {name:12s} {med[name]:6.2f} s  {images / med[name]:7.0f} images/s   runs: "
              + ", ".join(f"{s:.2f}" for s in r))
    print(f"  Beam DirectRunner / local: {med['beam-direct'] / med['local']:.2f}x the time")
    print(f"  S3 (moto, loopback) / local disk: {med['s3'] / med['local']:.2f}x the time")


if __name__ == "__main__":
    main()
