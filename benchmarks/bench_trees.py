"""convert and verify of one tree of the package against another's: a change that moves code (a rename, a
restructure) must change neither the bytes written nor the work done.

Makes N ImageNet-sized JPEGs once (~100 KB each, 100 classes), then runs, as whole processes with
PYTHONPATH set to each tree, pairs A B A B ... (`sync` before each timed run):
  convert --train-dir inputs/train --labels-file inputs/labels.txt --train-shards S --workers W --json
  verify OUT --json
and prints, per command, the median ratio after / before of wall and CPU seconds (user + sys of the
process and its workers) with their spread, and whether both trees wrote the same bytes.
Usage: python benchmarks/bench_trees.py BEFORE_TREE AFTER_TREE [--images 8000] [--shards 64] [--pairs 9]
  (a tree: a checkout's root, e.g. one `git worktree add /tmp/before <commit>` made)
"""

import filecmp
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import bench_parser, kept_inputs, measure, remove  # noqa: E402


def compiled(tree):
    """A tree's bytecode written once, so that no timed run pays for compiling it."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(tree) / "imagenet_build")], check=True,
                   stdout=subprocess.DEVNULL)


def same_build(a, b):
    """Whether two build folders hold the same files with the same bytes (the manifest's times and paths aside)."""
    import json

    names = sorted(os.listdir(a))
    if names != sorted(os.listdir(b)):
        return False
    for name in names:
        left, right = Path(a) / name, Path(b) / name
        if left.is_dir():
            if not same_build(left, right):
                return False
        elif name == "manifest.json":
            shards = [json.loads(p.read_text())["splits"] for p in (left, right)]
            if shards[0] != shards[1]:
                return False
        elif not filecmp.cmp(left, right, shallow=False):
            return False
    return True


def main():
    parser = bench_parser(__doc__)
    parser.add_argument("before", help="the tree before the change (a checkout's root)")
    parser.add_argument("after", help="the tree after it")
    parser.add_argument("--pairs", type=int, default=9)
    parser.add_argument("--workers", type=int, default=2)
    parser.set_defaults(images=8000, shards=64)
    args = parser.parse_args()
    import tempfile

    work = Path(args.work or tempfile.mkdtemp(prefix="bench-trees-"))
    inputs = kept_inputs(work, args.images)
    trees = {"before": Path(args.before).resolve(), "after": Path(args.after).resolve()}
    for tree in trees.values():
        compiled(tree)
    out = {name: work / f"out-{name}" for name in trees}
    envs = {name: dict(os.environ, PYTHONPATH=str(tree)) for name, tree in trees.items()}
    convert = ["-m", "imagenet_build", "convert", "--train-dir", inputs / "train", "--labels-file",
               inputs / "labels.txt", "--train-shards", args.shards, "--workers", args.workers, "--json"]
    figures = {(verb, name): [] for verb in ("convert", "verify") for name in trees}
    same = True
    for _ in range(args.pairs):
        for name in trees:
            figures["convert", name].append(measure([sys.executable, *convert, "--output-dir", out[name]],
                                                    clear=[out[name]], env=envs[name]))
            figures["verify", name].append(measure([sys.executable, "-m", "imagenet_build", "verify", out[name],
                                                    "--json"], env=envs[name]))
        same = same and same_build(out["before"], out["after"])
    print(f"{args.images} images, {args.shards} shards, --workers {args.workers}, {args.pairs} pairs")
    print(f"{'command':<9} {'before wall/CPU s':>18} {'after/before wall':>24} {'after/before CPU':>24}")
    for verb in ("convert", "verify"):
        before, after = figures[verb, "before"], figures[verb, "after"]
        wall, cpu = (statistics.median(r[i] for r in before) for i in (0, 1))
        line = f"{verb:<9} {wall:8.2f} {cpu:8.2f}"
        for i in (0, 1):
            ratios = [a[i] / b[i] for a, b in zip(after, before)]
            line += f"   {statistics.median(ratios):.3f} ({min(ratios):.2f}-{max(ratios):.2f})"
        print(line)
    print("same bytes written by both trees:", "yes" if same else "NO")
    remove(list(out.values()))


if __name__ == "__main__":
    main()
