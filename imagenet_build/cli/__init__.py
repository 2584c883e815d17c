"""The `imagenet-build` command: parse, call one function, print.

Heavy modules are imported inside the commands, so `--help` is instant.
Results go to stdout (or one JSON document with --json), progress to stderr,
and a user mistake gives one `error:` line and a non-zero exit, not a traceback.
"""

from __future__ import annotations

from imagenet_build.cli import check_commands, convert, report_command, tools  # noqa: F401  (each registers its verbs on the group)
from imagenet_build.cli.group import cli


def main() -> None:
    cli(prog_name="imagenet-build")
