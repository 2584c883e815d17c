"""The version of imagenet-build, written once: the package's metadata is made from it (pyproject.toml),
and --version, every manifest and every --json document give it. A module of its own, importing nothing,
so that format/manifest.py stamps it without importing the package's top (whose write_arrays reaches the
writer)."""

__version__ = "0.1.0"
