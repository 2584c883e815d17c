"""The pages' runnable blocks run as written: a fenced block right after a `<!-- runnable -->` line (README.md,
docs/*.md) is run, each page's in order in one new folder, as a reader following the page would run them, with
`imagenet-build` this package's command. A shell block runs in bash (stopping at its first failing command), a
`python` block in Python."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKER = "<!-- runnable -->"
LANGUAGES = {"": "sh", "sh": "sh", "bash": "sh", "shell": "sh", "python": "python"}
RUN_WITHIN = 600  # seconds a page's blocks may take: only so that a hang fails


def runnable_blocks(page):
    """[(line of the marker, "sh" or "python", the block's text)] of a page, in order; a marker not followed by
    a fenced block of a language run here is a mistake in the page."""
    lines = page.read_text().splitlines()
    blocks = []
    for number, line in enumerate(lines):
        if line.strip() != MARKER:
            continue
        fence = lines[number + 1] if number + 1 < len(lines) else ""
        assert fence.startswith("```") and fence[3:].strip() in LANGUAGES, \
            f"{page.name}:{number + 1}: {MARKER} must come right before a ``` block (sh or python), not {fence!r}"
        end = next(k for k in range(number + 2, len(lines)) if lines[k].startswith("```"))
        blocks.append((number + 1, LANGUAGES[fence[3:].strip()], "\n".join(lines[number + 2:end]) + "\n"))
    return blocks


RUNNABLE = [page for page in PAGES if runnable_blocks(page)]


def test_the_readme_quick_start_and_the_api_example_are_marked_runnable():
    """The first run a reader makes (the README's quick start) and the Python API's example are held to running."""
    assert {page.relative_to(ROOT).as_posix() for page in RUNNABLE} >= {"README.md", "docs/api.md"}
    quick_start = ROOT.joinpath("README.md").read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert MARKER in quick_start


def this_packages_command(folder):
    """A folder for PATH whose `imagenet-build` and `python` are this test's Python and this package."""
    folder.mkdir()
    (folder / "imagenet-build").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m imagenet_build "$@"\n')
    (folder / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    for name in ("imagenet-build", "python"):
        (folder / name).chmod(0o755)
    return folder


@pytest.mark.slow
@pytest.mark.parametrize("page", RUNNABLE, ids=[p.relative_to(ROOT).as_posix() for p in RUNNABLE])
def test_a_pages_runnable_blocks_run_as_written(page, tmp_path):
    """The README's quick start said `imagenet-build sample DIR` made something to try convert --from on, and
    convert --from refused it; docs/api.md's example failed the same way."""
    bin_folder = this_packages_command(tmp_path / "bin")
    work = tmp_path / "work"
    work.mkdir()
    env = dict(os.environ, PATH=f"{bin_folder}{os.pathsep}{os.environ['PATH']}")
    for line, language, text in runnable_blocks(page):
        command = ["bash", "-euo", "pipefail", "-c", text] if language == "sh" else [sys.executable, "-c", text]
        result = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=RUN_WITHIN)
        where = f"{page.relative_to(ROOT)}:{line}"
        assert result.returncode == 0, f"{where}: exit {result.returncode}\n{result.stdout[-2000:]}{result.stderr}"
        assert "Traceback" not in result.stderr and "error: " not in result.stderr, f"{where}: {result.stderr}"
