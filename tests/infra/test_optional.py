"""infra/optional.py: a missing extra's hint says how to add it to the install at hand (a clone, a wheel, a Docker
image): imagenet-build is on no package index, and a hint for a clone was wrong everywhere else."""

import sys

import pytest

import imagenet_build
from imagenet_build.infra import optional
from imagenet_build.infra.optional import IMAGE_ENV, install_hint, installed_as

WHEEL = f"imagenet_build-{imagenet_build.__version__}-py3-none-any.whl"


def test_in_a_clone_the_hint_is_pip_install_of_the_clone_with_its_constraints(monkeypatch):
    monkeypatch.delenv(IMAGE_ENV, raising=False)
    assert installed_as() == "clone"  # the tests run from a clone
    assert install_hint(["matplotlib"]) == "in a clone of imagenet-build, pip install -c constraints.txt '.[report]'"
    assert install_hint(["tensorflow", "nvidia.dali", optional.PLUGIN]) == (
        "in a clone of imagenet-build, pip install -c constraints.txt '.[dali,tf]'; then pip install -c "
        "constraints.txt --no-build-isolation 'nvidia-dali-tf-plugin-cuda120>=2.4,<2.5' (after TensorFlow and DALI)")


def test_installed_from_a_wheel_the_hint_is_pip_install_of_the_wheel_with_the_extra(monkeypatch, tmp_path):
    """Installed into site-packages (a wheel, or a clone's `pip install .`), no clone beside the package: the wheel
    named with the extra (tests/e2e/test_wheel.py shows it from a real wheel's install)."""
    monkeypatch.delenv(IMAGE_ENV, raising=False)
    monkeypatch.setattr(optional, "__file__", str(tmp_path / "site-packages/imagenet_build/infra/optional.py"))
    assert installed_as() == "wheel"
    assert install_hint(["torch", "pyspark"]) == (
        f"pip install -c constraints.txt '{WHEEL}[spark,torch]' (the wheel imagenet-build was installed from, "
        "and the constraints.txt of the clone it was made in)")


def test_a_clone_is_its_pyproject_and_constraints_beside_the_package(monkeypatch, tmp_path):
    """Where the package lies in a folder holding both (a clone, `pip install -e .`): a clone; one of them alone, or
    both a folder further up, is no clone of it."""
    monkeypatch.delenv(IMAGE_ENV, raising=False)
    clone = tmp_path / "up" / "clone"
    monkeypatch.setattr(optional, "__file__", str(clone / "imagenet_build" / "infra" / "optional.py"))
    for folder, names, found in ((clone, ["pyproject.toml"], "wheel"), (tmp_path / "up", ["pyproject.toml",
                                 "constraints.txt"], "wheel"), (clone, ["pyproject.toml", "constraints.txt"], "clone")):
        folder.mkdir(parents=True, exist_ok=True)
        for name in names:
            (folder / name).write_text("")
        assert installed_as() == found, (folder, names)


def test_a_module_of_no_extra_is_installed_by_its_name_and_a_submodule_by_its_packages_extra(monkeypatch):
    monkeypatch.delenv(IMAGE_ENV, raising=False)
    assert install_hint(["yaml"]) == "pip install yaml"
    assert install_hint(["nvidia.dali.fn", "yaml", optional.PLUGIN]) == (
        "in a clone of imagenet-build, pip install -c constraints.txt '.[dali]'; then pip install yaml; then pip "
        "install -c constraints.txt --no-build-isolation 'nvidia-dali-tf-plugin-cuda120>=2.4,<2.5' (after "
        "TensorFlow and DALI)")


def test_in_a_docker_image_the_hint_is_an_image_built_from_it_with_the_extra(monkeypatch):
    """The images install the tool as root and run as a user who cannot add to it: a derived image can."""
    monkeypatch.setenv(IMAGE_ENV, "imagenet-build")
    assert installed_as() == "image"
    assert install_hint(["matplotlib"]) == (
        "the Docker image imagenet-build holds none: build one FROM it that does (USER root, RUN pip install -c "
        "/opt/imagenet-build/constraints.txt '/opt/imagenet-build[report]')")
    assert install_hint([optional.PLUGIN]) == (
        "pip install -c /opt/imagenet-build/constraints.txt --no-build-isolation "
        "'nvidia-dali-tf-plugin-cuda120>=2.4,<2.5' (after TensorFlow and DALI)")


def test_the_images_set_their_name_where_the_hint_reads_it():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    for dockerfile, name in (("Dockerfile", "imagenet-build"), ("Dockerfile.gpu", "imagenet-build:gpu")):
        text = (root / "docker" / dockerfile).read_text()
        assert f"{IMAGE_ENV}={name}" in text and f"WORKDIR {optional.IMAGE_SOURCE}\n" in text
        assert "COPY constraints.txt" in text or "COPY pyproject.toml constraints.txt" in text


def test_what_is_missing_is_named_in_one_line_and_found_without_importing_it(monkeypatch):
    """The registries' and require_all's list of what is missing (not_installed), each module named, in order; a
    module under a parent package that is missing is not installed either (find_spec raises there)."""
    from imagenet_build.infra.errors import BuildError

    assert optional.not_installed(["json", "no_a", "os", "no_b"]) == ["no_a", "no_b"]
    assert not optional.is_installed("no_such_parent_here.child") and optional.is_installed("json")
    assert optional.is_installed("colorsys")
    monkeypatch.setitem(sys.modules, "colorsys", None)  # an import refused: not installed
    assert not optional.is_installed("colorsys")
    assert optional.missing_all_message(["no_a", "no_b", "no_c"], "P").startswith(
        "P needs no_a, no_b and no_c, which are not installed: ")
    for call in (lambda: optional.require("no_such_module_here", "P"),
                 lambda: optional.require_all(["os", "no_such_module_here"], "P")):
        with pytest.raises(BuildError) as raised:
            call()
        assert str(raised.value) == ("P needs no_such_module_here, which is not installed: "
                                     "pip install no_such_module_here")
