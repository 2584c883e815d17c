"""The sizes the docs quote, measured (README's install paragraph, docs/docker.md's table).

    python scripts/measure_sizes.py [--venv .venv] [--docker]

- The environment on disk: every file under the venv, by its blocks (as `du` counts them), each inode once.
- What an install with some extras weighs: the distributions imagenet-build's metadata requires for them, followed
  through their own requirements (markers evaluated for this interpreter), each distribution's files as its
  RECORD lists them; the venv's Python itself and pip aside. The test environment is the `test` extras and DALI's
  TF plugin; the demo's (scripts/demo.sh) the `tf` and `dali` extras and the plugin.
- The largest parts: PyTorch with the CUDA libraries and Triton its wheel requires, TensorFlow, DALI.
- With --docker: the CPU image built from this clone (`docker build -f docker/Dockerfile -t imagenet-build .`,
  timed), and the size Docker gives for each image present (`docker image inspect`: all its layers, unpacked).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "imagenet-build"
PLUGIN = "nvidia-dali-tf-plugin-cuda120"
IMAGES = ("python:3.11-slim-bookworm", "imagenet-build", "imagenet-build:gpu")


def normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def disk_usage(paths, seen: set) -> int:
    """Bytes on disk of the files among `paths` (blocks, as du counts them), an inode counted once over calls."""
    total = 0
    for path in paths:
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            total += st.st_blocks * 512
    return total


def tree_usage(root: Path) -> int:
    seen: set = set()
    return sum(disk_usage([Path(folder) / name for name in names + folders], seen)
               for folder, folders, names in os.walk(root))


def distributions(venv: Path) -> dict[str, metadata.Distribution]:
    sites = sorted(venv.glob("lib/python3*/site-packages"))
    return {normal(d.metadata["Name"]): d for d in metadata.distributions(path=[str(s) for s in sites])}


def closure(dists: dict, roots: list[tuple[str, set[str]]]) -> set[str]:
    """The distributions `roots` [(name, extras)] need, followed through every requirement installed here."""
    from packaging.requirements import Requirement

    needed: set[str] = set()
    todo = list(roots)
    done: set[tuple[str, frozenset]] = set()
    while todo:
        name, extras = todo.pop()
        key = (normal(name), frozenset(extras))
        if key in done or normal(name) not in dists:
            continue
        done.add(key)
        needed.add(normal(name))
        for line in dists[normal(name)].requires or []:
            req = Requirement(line)
            if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in extras | {""}):
                todo.append((req.name, set(req.extras)))
    return needed


def dist_usage(dists: dict, names, seen: set) -> int:
    total = 0
    for name in names:
        files = dists[name].files or []
        total += disk_usage([dists[name].locate_file(f) for f in files], seen)
    return total


def gb(size: int) -> str:
    """Decimal units (a GB is 10^9 bytes), as pip and Docker give sizes; `du -h` gives GiB (2^30)."""
    return f"{size / 1e9:.2f} GB" if size >= 1e9 else f"{size / 1e6:.0f} MB"


def venv_sizes(venv: Path) -> None:
    dists = distributions(venv)
    total = tree_usage(venv)
    print(f"{venv}: {gb(total)} ({total / 2**30:.1f} GiB, as du -sh says) on disk, {len(dists)} distributions")
    sets = {"test extras + DALI's TF plugin": ({"test"}, [PLUGIN]),
            "demo: tf, dali + the plugin": ({"tf", "dali"}, [PLUGIN]),
            "the core (no extra)": (set(), [])}
    for title, (extras, more) in sets.items():
        names = closure(dists, [(PACKAGE, extras)] + [(m, set()) for m in more]) - {normal(PACKAGE)}
        print(f"  {title}: {gb(dist_usage(dists, names, set()))} in {len(names)} distributions")
    torch_part = {n for n in closure(dists, [("torch", set())]) if n == "torch" or n.startswith(("nvidia-", "triton"))}
    parts = {"PyTorch with its CUDA libraries and Triton": torch_part | {"torchvision"},
             "TensorFlow (tensorflow-cpu)": {"tensorflow-cpu", "tensorflow"},
             "DALI (and its TF plugin)": {"nvidia-dali-cuda120", PLUGIN}}
    for title, names in parts.items():
        print(f"  {title}: {gb(dist_usage(dists, names & set(dists), set()))}")


def docker_sizes(build: bool) -> None:
    if build:
        started = time.monotonic()
        subprocess.run(["docker", "build", "--network", "host", "-q", "-f", "docker/Dockerfile", "-t", "imagenet-build",
                        "."], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
        print(f"docker build -f docker/Dockerfile -t imagenet-build: {time.monotonic() - started:.0f} s")
    for image in IMAGES:
        found = subprocess.run(["docker", "image", "inspect", "-f", "{{.Size}}", image], capture_output=True, text=True)
        print(f"image {image}: " + (gb(int(found.stdout)) if found.returncode == 0 else "not built here"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--venv", default=str(ROOT / ".venv"))
    parser.add_argument("--docker", action="store_true", help="build the CPU image, then give each image's size")
    args = parser.parse_args()
    venv = Path(args.venv)
    if not (venv / "bin" / "python").exists():
        print(f"{venv}: no environment there (scripts/test.sh makes .venv)", file=sys.stderr)
        return 1
    venv_sizes(venv)
    if args.docker:
        docker_sizes(build=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
