"""The `imagenet-build` command group and every verb's ending: the result or the report on stdout, and a user
mistake as one `error:` line (with --json also a document) and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Mapping, Sequence
from typing import Any, Callable, NoReturn, TypeVar

import click

from imagenet_build import __version__
from imagenet_build.cli.stop import stop_on_signals, stopping
from imagenet_build.infra.errors import Interrupted, one_line


def _error_line(message: str, as_json: bool, exit_code: int) -> NoReturn:
    """The one ending of a failed command: `error: ...` on stderr, and with --json a document on stdout."""
    if as_json:
        print_json({"ok": False, "error": message, "exit_code": exit_code})
    click.echo(f"error: {message}", err=True)
    sys.exit(exit_code)


def _library_logs_off() -> None:
    """Libraries' log records are not the user's business (gcsfs's bucket-type error for every object read without
    Google's default credentials, Beam's import warnings, its channels' errors after a stop, py4j's): the command
    speaks in its own lines. A handler on the root logger that drops them keeps Python's last-resort handler off
    stderr, and makes basicConfig (which a library's import-time logging.warning calls) do nothing."""
    if not any(isinstance(handler, logging.NullHandler) for handler in logging.root.handlers):
        logging.root.addHandler(logging.NullHandler())


class _Commands(click.Group):
    """Every verb ends here: usage mistakes in one line with exit 2, bad inputs in one line with exit 1.

    With --json the same message also goes to stdout as `{"ok": false, "error": ...}`, so a
    `verb --json > report.json` always leaves a JSON document. Never a traceback for these.
    """

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        from imagenet_build.infra.errors import BuildError, UsageError

        argv = list(sys.argv[1:] if args is None else args)
        as_json = "--json" in argv
        _library_logs_off()
        restore = stop_on_signals()
        try:
            try:
                result = super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
            finally:
                Interrupted.stopping = True  # what is left is the ending: printed whole, whatever comes
        except click.UsageError as e:
            if type(e).__name__ == "NoArgsIsHelpError":  # bare `imagenet-build`: the help, as click shows it
                e.show()
                sys.exit(e.exit_code)
            verb = f" {e.ctx.info_name}" if e.ctx is not None and e.ctx.parent is not None else ""
            _error_line(f"{e.format_message()} (see: imagenet-build{verb} --help)", as_json, 2)
        except click.ClickException as e:
            _error_line(e.format_message(), as_json, e.exit_code)
        except click.Abort:
            _error_line("interrupted", as_json, 1)
        except UsageError as e:  # the tool's own: options that do not go together
            verb = f" {argv[0]}" if argv and argv[0] in getattr(self, "commands", {}) else ""
            _error_line(f"{e} (see: imagenet-build{verb} --help)", as_json, e.exit_code)
        except BuildError as e:
            _error_line(str(e), as_json, e.exit_code)
        except OSError as e:
            _error_line(one_line(e), as_json, 1)
        finally:
            restore()
        if not standalone_mode:
            return result
        sys.exit(result if isinstance(result, int) else 0)

    def invoke(self, ctx: click.Context) -> Any:
        """SIGTERM or Ctrl-C anywhere in a verb ends it as convert's does: `error: interrupted`, exit 1
        (and --json's document), after every `finally` on the way has run. An error the signal set
        off (a worker it ended too, in the same process group) is that interrupt, not a traceback."""
        from imagenet_build.infra.errors import Stopped

        try:
            result = super().invoke(ctx)
            Interrupted.raise_if_requested()  # ran to its end past a stop whose raise was lost: still a stop
            return result
        except KeyboardInterrupt:
            stopping()
            raise Stopped("interrupted") from None
        except Exception as e:
            if not Interrupted.requested or isinstance(e, Stopped):
                raise
            stopping()
            raise Stopped("interrupted") from None


_Result = TypeVar("_Result", bound=Mapping[str, Any])  # a checking command's result (a TypedDict, or a dict)


def report_and_exit(result: _Result, as_json: bool, format_report: Callable[[_Result], list[str]]) -> NoReturn:
    """A checking command's ending: the JSON or the readable report, exit 0 when ok, else 1 (a stop whose raise
    was lost on the way ends it as interrupted, never as its report)."""
    Interrupted.raise_if_requested()
    if as_json:
        print_json(result)
    else:
        for line in format_report(result):
            click.echo(line)
    sys.exit(0 if result["ok"] else 1)


def print_json(document: Mapping[str, Any]) -> None:
    """Every --json document, naming the version of imagenet-build that made it (as every manifest does). A
    verb's result is not printed past a stop whose raise was lost (the error's document comes once it is under
    way)."""
    Interrupted.raise_if_requested()
    click.echo(json.dumps(dict(document, imagenet_build_version=__version__), indent=1, sort_keys=True))


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="imagenet-build")
def cli() -> None:
    """ImageNet (ILSVRC2012) to TF-slim TFRecord shards with DALI indexes.

    Start with `imagenet-build sample DIR` for a small dataset to try, then
    `imagenet-build convert --help`.
    """


class PathOf(click.Path):
    """A path an option or argument names, and what the verb does there (`role`): every path of the command line is
    one (tests/cli/test_paths_written.py holds them to it, and tries every one that writes against every place a
    verb must never write, without a list of them).

    reads: an input, only read; reads-build: a build the verb reads (or judges); writes-file: a file the verb
    writes (`-` for stdout where it prints one); writes-folder: a folder the verb writes into."""

    ROLES = ("reads", "reads-build", "writes-file", "writes-folder")

    def __init__(self, role: str, **kwargs: Any) -> None:
        assert role in self.ROLES, role
        self.role = role
        super().__init__(**kwargs)


input_path = PathOf("reads")
input_file = PathOf("reads", dir_okay=False)
input_folder = PathOf("reads", file_okay=False)
build_folder = PathOf("reads-build", file_okay=False)
output_file = PathOf("writes-file")  # a folder given: the write door says so in its own words
output_folder = PathOf("writes-folder", file_okay=False)
