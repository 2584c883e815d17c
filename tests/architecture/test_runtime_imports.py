"""What each verb imports when it runs, as the import contracts promise it (pyproject.toml; scripts/lint_imports.py
checks them on the source): no verb but trainer-check imports TensorFlow, DALI or PyTorch, and none but report
imports matplotlib. Each verb is run here in one process, in turn, and the heavy packages each one brought in
are read from sys.modules after it."""

import json
import subprocess
import sys

import pytest

from conftest import sample_args

HEAVY = ("tensorflow", "nvidia.dali", "torch", "torchvision", "matplotlib")  # nvidia.*: also torch's CUDA libraries

RUN_VERBS = """
import json, sys
from click.testing import CliRunner
from imagenet_build.cli import cli

def imported(heavy=json.loads(sys.argv[1])):
    return {h for h in heavy if any(m == h or m.startswith(h + ".") for m in sys.modules)}

found = []
for args in json.loads(sys.argv[2]):
    before = imported()
    result = CliRunner().invoke(cli, args)
    after = imported()
    found.append({"args": args, "exit_code": result.exit_code, "output": result.output[-2000:],
                  "imported": sorted(after - before)})
print(json.dumps(found))
"""


def run_verbs(steps):
    """Each step's verb run in turn in one fresh process: its exit code, output, and the heavy packages it
    imported that no step before it had."""
    result = subprocess.run([sys.executable, "-c", RUN_VERBS, json.dumps(HEAVY), json.dumps(steps)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


VERBS = ["convert", "verify", "index", "trainer-check", "bboxes", "prepare-val", "sample", "tfds", "report"]


def test_every_verb_imports_only_what_its_extra_brings(sample_dir, converted, tmp_path):
    """Every verb and its --help, the verbs that read or write without TensorFlow, DALI, PyTorch or matplotlib
    first, then report (matplotlib, nothing else heavy); trainer-check's own run is the next test's."""
    from imagenet_build.cli import cli

    assert sorted(cli.commands) == sorted(VERBS)  # a new verb: give it its run here
    out = tmp_path / "out"
    quiet = [[verb, "--help"] for verb in VERBS] + [["--help"]] + [
        sample_args(sample_dir, out, "--workers", 1),
        ["verify", str(out), "--workers", 1],
        ["index", str(out / "train-00000-of-00004"), "--index-dir", str(tmp_path / "idx"), "--workers", 1],
        ["sample", str(tmp_path / "tarballs"), "--tarballs", "--classes", 2, "--per-class", 2],
        ["bboxes", str(tmp_path / "tarballs" / "ILSVRC2012_bbox_train_v2.tar.gz"), "-o", str(tmp_path / "b.csv")],
        ["prepare-val", str(sample_dir / "validation"), "--labels", str(sample_dir / "validation_labels.txt"),
         "--dry-run"],
        ["tfds", str(out)],
    ]
    steps = [[str(a) for a in args] for args in quiet] + [["report", str(converted), "-o", str(tmp_path / "r.html")]]
    found = run_verbs(steps)
    for step in found:
        assert step["exit_code"] == 0, step
    assert {" ".join(s["args"][:1]): s["imported"] for s in found if s["imported"]} == {"report": ["matplotlib"]}
    assert {s["args"][0] for s in found} == set(VERBS) | {"--help"}


@pytest.mark.slow
def test_trainer_check_through_pytorch_imports_neither_tensorflow_dali_nor_matplotlib(converted):
    found = run_verbs([["trainer-check", str(converted), "--framework", "torch", "--device", "cpu", "--steps", "2",
                        "--batch-size", "8", "--workers", "0"]])
    assert found[0]["exit_code"] == 0, found[0]
    # on the CPU the DataLoader workers decode with libjpeg-turbo (SampleTransform): torchvision is not needed
    assert found[0]["imported"] == ["torch"], found[0]


IMPORT_THE_PACKAGE = """
import json, sys
import imagenet_build
first = sorted(m for m in sys.modules if m.startswith("imagenet_build"))
functions = [getattr(imagenet_build, name) for name in imagenet_build.FUNCTIONS]
heavy = [m for m in sys.modules for h in json.loads(sys.argv[1]) if m == h or m.startswith(h + ".")]
print(json.dumps({"first": first, "heavy": heavy, "names": [f.__name__ for f in functions]}))
"""


def test_importing_the_package_imports_its_version_and_naming_its_functions_nothing_heavy():
    """`import imagenet_build` (which `imagenet_build.dali` and every worker process import too) brings in its
    version alone; the functions of its top (write_arrays' module among them) bring in no heavy package."""
    result = subprocess.run([sys.executable, "-c", IMPORT_THE_PACKAGE, json.dumps(HEAVY + ("numpy", "PIL"))],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout)
    assert found["first"] == ["imagenet_build", "imagenet_build._version"]
    assert found["heavy"] == [] and found["names"] == ["convert", "verify", "index", "report", "write_arrays"]
