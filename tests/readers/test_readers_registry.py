"""The reader library's registry (readers/registry.py): importing imagenet_build.readers registers every reader
of the library by its own module (no trainer-check needed), each naming what it needs and whether it reads by
index; a name registered twice is refused."""

import subprocess
import sys

import pytest

from imagenet_build.infra import optional
from imagenet_build.readers import registry


def test_importing_the_library_registers_every_reader_and_no_trainer():
    code = ("import sys; from imagenet_build.readers.registry import READERS\nimport imagenet_build.readers\n"
            "print(sorted((r.name, r.by_index) for r in READERS.values()))\n"
            "print(sorted(m for m in sys.modules if m.startswith(('imagenet_build.trainercheck', 'torch', "
            "'tensorflow', 'nvidia', 'grain'))))")
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines() == [
        "[('dali', True), ('grain', True), ('tfdata', False), ('torch', True)]", "[]"]


def test_each_reader_names_what_it_needs(monkeypatch):
    import imagenet_build.readers  # noqa: F401  (registers them)

    assert {name: reader.needs for name, reader in registry.READERS.items()} == {
        "dali": ("nvidia.dali",), "grain": ("grain",), "tfdata": ("tensorflow",), "torch": ("torch", "torchvision")}
    monkeypatch.setattr(optional, "is_installed", lambda module: module != "torchvision")
    assert optional.not_installed(registry.READERS["torch"].needs) == ["torchvision"]
    assert optional.not_installed(registry.READERS["dali"].needs) == []


def test_a_reader_registered_twice_is_refused(monkeypatch):
    monkeypatch.setattr(registry, "READERS", {})
    registry.register(registry.BuildReader("once", "the first", ()))
    with pytest.raises(ValueError, match="reader 'once' registered twice"):
        registry.register(registry.BuildReader("once", "again", ()))


def test_the_docs_name_every_reader_by_its_name_and_its_public_module():
    """docs/readers.md names each registered reader and its public module, as the reader's title does."""
    from pathlib import Path

    import imagenet_build.readers  # noqa: F401  (registers them)

    text = " ".join((Path(__file__).resolve().parents[2] / "docs" / "readers.md").read_text().split())
    for name, reader in registry.READERS.items():
        public = f"imagenet_build.{name}"
        assert f"`{name}` (`{public}`)" in text, name
        assert f"({public})" in reader.title, reader
