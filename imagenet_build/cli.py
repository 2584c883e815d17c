"""The `imagenet-build` command: parse, call one function, print.

Heavy modules are imported inside the commands, so `--help` is instant.
Results go to stdout (or one JSON document with --json), progress to stderr,
and a user mistake gives one `error:` line and a non-zero exit, not a traceback.
"""

from __future__ import annotations

import functools
import json
import signal
import sys
import threading
from collections.abc import Mapping, Sequence
from types import FrameType
from typing import Any, Callable, NoReturn, TypeVar

import click

from imagenet_build.infra.errors import Interrupted, one_line


def _error_line(message: str, as_json: bool, exit_code: int) -> NoReturn:
    """The one ending of a failed command: `error: ...` on stderr, and with --json a document on stdout."""
    if as_json:
        _print_json({"ok": False, "error": message, "exit_code": exit_code})
    click.echo(f"error: {message}", err=True)
    sys.exit(exit_code)


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
        restore = _stop_on_signals()
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
            return super().invoke(ctx)
        except KeyboardInterrupt:
            _stopping()
            raise Stopped("interrupted") from None
        except Exception as e:
            if not Interrupted.requested or isinstance(e, Stopped):
                raise
            _stopping()
            raise Stopped("interrupted") from None


_PUT_BACK: dict[int, Any] = {}  # the handlers a command replaced, put back when it ends


def _interrupt(signum: int, frame: FrameType | None) -> None:
    """SIGTERM or Ctrl-C: stop the command where it is, as a KeyboardInterrupt (every `finally` runs:
    workers stopped, the manifest written, locks and temporary files released). Once the stop is
    under way, later signals change nothing; until then (a raise lost in a __del__) each raises again."""
    if Interrupted.stopping:
        return
    Interrupted.requested = True
    raise Interrupted


def _swallowed(unraisable: Any, other: Callable[[Any], None]) -> None:
    """sys.unraisablehook while a command runs: a stop signal's raise that Python swallowed (it came
    in a __del__ or an at-fork hook, where an exception goes nowhere) is raised again a moment later,
    outside it, instead of being printed and lost (the command then ran on to its end)."""
    if not isinstance(unraisable.exc_value, Interrupted):
        other(unraisable)
    elif not Interrupted.stopping:  # _interrupt again, as Ctrl-C would; sent to the main thread, a signal
        main = threading.main_thread().ident  # also wakes it from a blocking call, as the first one did
        assert main is not None
        threading.Timer(0.05, signal.pthread_kill, (main, signal.SIGINT)).start()


def _replace_handler(number: int, handler: Any) -> None:
    _PUT_BACK.setdefault(number, signal.getsignal(number))
    signal.signal(number, handler)


def _stopping() -> None:
    """The stop is under way: later signals are ignored, and so is a child's end. PyTorch's SIGCHLD
    handler would raise for a DataLoader worker the same signal ended, in the DataLoader's __del__ at
    exit (after the command has printed its line): it is not put back."""
    Interrupted.stopping = True
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)


def _stop_on_signals() -> Callable[[], None]:
    """Every verb: SIGTERM and Ctrl-C end it through _interrupt. Returns what puts the handlers (and the
    stop's state) back: the CLI may run inside another program, a test's process."""
    Interrupted.requested = Interrupted.stopping = False
    if threading.current_thread() is not threading.main_thread():
        return lambda: None  # only the main thread may set handlers; there, Python's defaults stay
    for number in (signal.SIGINT, signal.SIGTERM):
        _replace_handler(number, _interrupt)
    unraisable_hook = sys.unraisablehook
    sys.unraisablehook = functools.partial(_swallowed, other=unraisable_hook)

    def restore() -> None:
        Interrupted.requested = Interrupted.stopping = False
        sys.unraisablehook = unraisable_hook
        for number, handler in _PUT_BACK.items():
            if handler is not None:  # None: a handler not set from Python, which cannot be put back
                signal.signal(number, handler)
        _PUT_BACK.clear()

    return restore


_Result = TypeVar("_Result", bound=Mapping[str, Any])  # a checking command's result (a TypedDict, or a dict)


def _report_and_exit(result: _Result, as_json: bool, format_report: Callable[[_Result], list[str]]) -> NoReturn:
    """A checking command's ending: the JSON or the readable report, exit 0 when ok, else 1."""
    if as_json:
        _print_json(result)
    else:
        for line in format_report(result):
            click.echo(line)
    sys.exit(0 if result["ok"] else 1)


def _print_json(document: Any) -> None:
    click.echo(json.dumps(document, indent=1, sort_keys=True))


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="imagenet-build")
def cli() -> None:
    """ImageNet (ILSVRC2012) to TF-slim TFRecord shards with DALI indexes.

    Start with `imagenet-build sample DIR` for a small dataset to try, then
    `imagenet-build convert --help`.
    """


existing_dir = click.Path(exists=False, file_okay=False)
existing_file = click.Path(dir_okay=False)


@cli.command()
@click.option("--from", "from_paths", multiple=True, type=click.Path(),
              help="Any copy of ImageNet, recognised by its layout: the ILSVRC2012 archives (or a folder holding "
              "them), the folders extracted from them, ... Repeat for each file of one copy. Instead of "
              "--train-dir/--train-tar/--validation-dir/--validation-tar.")
@click.option("--subset", help="Only the images named in this file (original file names, one a line), or a shipped "
              "list: imagenet-1pct, imagenet-10pct (SimCLR's 12,811 / 128,116 train images). Labels keep their "
              "values; slim's shuffle and layout apply to the subset.")
@click.option("--train-dir", type=existing_dir, help="Train images as <synset>/*.JPEG.")
@click.option(
    "--validation-dir",
    type=existing_dir,
    help="Validation images: flat ILSVRC2012_val_%08d.JPEG (labelled from --validation-labels-file) "
    "or <synset>/*.JPEG folders; detected.",
)
@click.option("--train-tar", type=existing_file,
              help="ILSVRC2012_img_train.tar, read in place (instead of --train-dir).")
@click.option("--validation-tar", type=existing_file,
              help="ILSVRC2012_img_val.tar, read in place (instead of --validation-dir).")
@click.option("--output-dir", required=True, type=existing_dir, help="Where shards and manifest.json go.")
@click.option("--bounding-box-file", type=existing_file, help="slim's box CSV: <image>.JPEG,xmin,ymin,xmax,ymax.")
@click.option("--bbox-tar", type=click.Path(),
              help="ILSVRC2012_bbox_train_v2.tar.gz, the folder holding it, or the <synset>/*.xml folder "
              "extracted from it; read as `bboxes` reads it (finding no XML file is an error).")
@click.option("--train-shards", default=1024, show_default=True, type=click.IntRange(min=1))
@click.option("--validation-shards", default=128, show_default=True, type=click.IntRange(min=1))
@click.option(
    "--layout-threads",
    default=8,
    show_default=True,
    type=click.IntRange(min=1),
    help="slim's num_threads: fixes which image lands in which shard (not how many processes run). "
    "Shard counts must be multiples of it.",
)
@click.option(
    "--workers",
    default=0,
    type=click.IntRange(min=0),
    help="Processes that write shards; 0 (the default): one per core. The output is the same for any value.",
)
@click.option("--labels-file", type=existing_file,
              help="Synsets, one a line; label = line number. [default: the 1000 ILSVRC2012 synsets]")
@click.option("--metadata-file", type=existing_file,
              help="<synset>\\t<text> lines. [default: shipped imagenet_metadata.txt]")
@click.option(
    "--validation-labels-file",
    type=existing_file,
    help="Synset of validation image i on line i. [default: shipped ILSVRC2012 validation labels]",
)
@click.option("--index-dir", type=existing_dir, help="Where DALI indexes go. [default: OUTPUT_DIR/dali_idx]")
@click.option(
    "--on-error",
    type=click.Choice(["fail", "skip"]),
    default="fail",
    show_default=True,
    help="fail: stop at the first bad input; skip: leave it out and list it in the manifest.",
)
@click.option("--overwrite", is_flag=True, help="Replace a previous build in OUTPUT_DIR instead of resuming it.")
@click.option("--verify-inputs", is_flag=True,
              help="On a rerun, re-read the inputs of every shard kept from before and rebuild it in memory: "
              "kept only if the bytes are the same (by default a rerun trusts each input's size and mtime).")
@click.option(
    "--classes-from-folders",
    is_flag=True,
    help="Any dataset of class folders (not ImageNet): classes are the sub-folders of --train-dir in sorted "
    "order (label 1 first, written to OUTPUT_DIR/labels.txt), images *.jpg/*.jpeg/*.png in any case.",
)
@click.option("--runner", type=click.Choice(["local", "beam"]), default="local", show_default=True,
              help="local: worker processes here; beam: one Apache Beam task per shard (extra [beam]).")
@click.option("--beam-options", default="", help="Beam pipeline options, e.g. '--runner DataflowRunner --project P "
              "--region R --temp_location gs://B/tmp' [default: the DirectRunner].")
@click.option("--resize", help="Resized builds instead of the full-size one: shorter:N (shorter side to N, aspect "
              "kept), longer:N (longer side to at most N), or several sizes in one pass, e.g. shorter:160,224,288; "
              "each size is a complete build in OUTPUT_DIR/<shorter-N|longer-N>/. Same shuffle and shards as full "
              "size. N is 1 to 13,377 (an N x N image within Pillow's decompression-bomb limit).")
@click.option("--quality", type=click.IntRange(1, 100), help="JPEG quality of resized images. [default: 90]")
@click.option("--resize-larger-only/--resize-all", default=True,
              help="Store images already within the size untouched (default), or resize and re-encode every image.")
@click.option("--exif-transpose", is_flag=True, help="Turn resized images upright by their EXIF orientation first "
              "(default: ignore it, as TensorFlow's decoder and slim do).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
def convert(as_json: bool, **options: Any) -> None:
    """Convert ImageNet (folders or the ILSVRC2012 tarballs) into shuffled, sharded TFRecords in slim's format.

    Writes OUTPUT_DIR/{train,validation}-NNNNN-of-SSSSS, a DALI index per shard
    and manifest.json (written last). Running the same command again resumes:
    shards the manifest lists, whose sha256 still matches, are kept.
    """
    from imagenet_build.build.run import ConvertOptions
    from imagenet_build.build.run import convert as run_convert

    summary = run_convert(ConvertOptions(**options))
    if as_json:
        _print_json(summary)
        return
    if "found" in summary:
        click.echo(f"found: {summary['found']}")
    if "builds" not in summary:
        _print_build(summary)
    else:
        for folder, build in summary["builds"].items():
            click.echo(f"{folder}:")
            _print_build(build, "  ")
        builds = len(summary["builds"])
        click.echo(f"one pass: {summary['shards_read']} shards read once for {builds} "
                   f"build{'s' if builds > 1 else ''} in "
                   f"{summary['seconds']:.1f} s" + (f" ({summary['images_per_second']:.0f} images/s)"
                                                   if summary["images_per_second"] else ""))
    if "boxes" in summary:
        b = summary["boxes"]
        click.echo(f"boxes: {b['images_with_boxes']} images got boxes from {b['rows']} box rows; "
                   f"{b['rows_naming_no_image']} rows named no image of this build")
    for note in summary["notes"]:
        click.echo(f"note: {note}")
    if "builds" not in summary:
        click.echo(f"manifest: {summary['manifest']}")


def _print_build(summary: dict[str, Any], indent: str = "") -> None:
    """One build's lines of convert's report."""
    from imagenet_build.sources.base import SHOWN

    def echo(line: str) -> None:
        click.echo(indent + line)

    for split, s in summary["splits"].items():
        echo(f"{split}: {s['records']} records in {s['shards']} shards ({s['layout']} input, {s['images']} images)")
    echo(
        f"shards written: {summary['shards_written']}, kept from before: {summary['shards_kept']}; "
        f"{summary['bytes'] / 1e6:.1f} MB in {summary['seconds']:.1f} s"
        + (f" ({summary['images_per_second']:.0f} images/s)" if summary["images_per_second"] else "")
    )
    reencoded = [r for r in summary["reencoded"] if r["reencoded"]]
    if reencoded:
        echo(f"re-encoded as RGB JPEG: {len(reencoded)} ({', '.join(sorted({r['reencoded'] for r in reencoded}))})")
    for r in reencoded[:SHOWN]:
        echo(f"re-encoded: {r['file']}: {r['reencoded']}")
    if len(reencoded) > SHOWN:
        echo(f"re-encoded: {len(reencoded) - SHOWN} more (--json lists every one)")
    for r in summary["reencoded"]:
        if r["note"]:
            echo(f"note: {r['file']}: {r['note']}")
    for s in summary["skipped"]:
        echo(f"skipped: {s['file']}: {s['reason']}")
    if indent:
        echo(f"manifest: {summary['manifest']}")


@cli.command()
@click.argument("folder", type=click.Path(file_okay=False))
@click.option("--index-dir", type=existing_dir,
              help="Where the DALI indexes are. [default: the manifest's, else FOLDER/dali_idx]")
@click.option("--quick", is_flag=True, help="Lengths and length CRCs and the indexes only: seeks over the payloads.")
@click.option("--deep", is_flag=True, help="Also decode every image with Pillow and check its size.")
@click.option("--expect-imagenet", is_flag=True,
              help="Also require the full ILSVRC2012 totals (1,281,167 / 50,000, 1000 classes).")
@click.option("--workers", default=0, type=click.IntRange(min=0),
              help="Processes; 0 (the default): one per core.")
@click.option("--json", "as_json", is_flag=True, help='Print {"ok", "problems", "warnings", "summary"} as JSON.')
def verify(folder: str, index_dir: str | None, quick: bool, deep: bool, expect_imagenet: bool, workers: int,
           as_json: bool) -> None:
    """Prove the shards in FOLDER and their DALI indexes sound.

    Checks every record's framing and both CRC32Cs, every DALI index against the
    real record offsets (DALI itself accepts empty, short and duplicated indexes
    without a word), the shard set, manifest.json (counts, sha256), and that every
    record is a slim Example with sane values. Reports every problem with file,
    record and byte offset. Exit 0 when sound, 1 when problems were found.
    """
    from imagenet_build.verify.report import format_report
    from imagenet_build.verify.run import verify as run_verify

    result = run_verify(folder, index_dir=index_dir, quick=quick, deep=deep,
                        expect_imagenet=expect_imagenet, workers=workers)
    _report_and_exit(result, as_json, format_report)


@cli.command()
@click.argument("inputs", nargs=-1, required=True, type=click.Path())
@click.option("--index-dir", type=existing_dir,
              help="Where to write the indexes. [default: dali_idx/ beside each file]")
@click.option("--workers", default=0, type=click.IntRange(min=0),
              help="Processes; 0 (the default): one per core.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
def index(inputs: tuple[str, ...], index_dir: str | None, workers: int, as_json: bool) -> None:
    """Write a DALI index for each TFRecord file in INPUTS (files or folders).

    Byte-identical to DALI's tfrecord2idx for every sound file, but reads only
    the record headers (seeking over payloads) and checks each length's CRC. A
    file whose framing is broken is refused, by name and byte offset, and gets
    no index: tfrecord2idx would write a partial one and exit 0. Exit 1 if any
    file was refused.
    """
    from imagenet_build.format.dali_index import index_shards

    result = index_shards(inputs, index_dir=index_dir, workers=workers)
    if as_json:
        _print_json(result)
    else:
        click.echo(f"indexed {len(result['indexed'])} file(s), {result['records']} records, "
                   f"in {result['seconds']:.1f} s")
    for r in result["refused"]:
        where = f" at byte {r['offset']}" if r["offset"] is not None else ""
        click.echo(f"refused: {r['file']}{where}: {r['message']}; no index written", err=True)
    sys.exit(0 if result["ok"] else 1)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


class _ChannelOptions(click.Command):
    """trainer-check's --mean and --std as the README writes them, `--mean 0 0 0`, besides one value
    (`--mean '0 0 0'`, `--mean 0,0,0`): up to three numbers after the option become its one value."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        joined: list[str] = []
        rest = list(args)
        while rest:
            arg = rest.pop(0)
            joined.append(arg)
            if arg == "--":
                joined += rest
                break
            if arg in ("--mean", "--std"):
                numbers: list[str] = []
                while rest and len(numbers) < 3 and _is_number(rest[0]):
                    numbers.append(rest.pop(0))
                if numbers:
                    joined.append(" ".join(numbers))
        return super().parse_args(ctx, joined)


def _split_name(ctx: click.Context, param: click.Parameter, value: str) -> str:
    from imagenet_build.format.naming import SPLIT_NAME

    if not SPLIT_NAME.fullmatch(value):
        raise click.BadParameter("a split is named with letters, digits, '_', '.' and '-' (train, validation, test)")
    return value


def _floats3(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[float, ...] | None:
    if value is None:
        return None
    try:
        numbers = tuple(float(v) for v in value.replace(",", " ").split())
    except ValueError:
        numbers = ()
    if len(numbers) != 3:
        raise click.BadParameter("three numbers, one per channel (R G B), e.g. '123.68 116.28 103.53'")
    return numbers


@cli.command("trainer-check", cls=_ChannelOptions)
@click.argument("folder", type=click.Path(file_okay=False))
@click.option("--split", default="train", show_default=True, callback=_split_name,
              help="The split whose shards to read: train, validation, or any other the folder holds (test, ...).")
@click.option("--framework", type=click.Choice(["dali", "torch"]), default="dali", show_default=True,
              help="dali: DALI into Keras (extras tf, dali); torch: the PyTorch reader into torchvision (extra torch).")
@click.option("--device", type=click.Choice(["auto", "gpu", "cuda", "cpu"]), default="auto", show_default=True,
              help="auto: the GPU when the framework sees one, else the CPU (gpu and cuda are the same).")
@click.option("--steps", type=click.IntRange(min=1),
              help="Training steps [default: on a GPU 200 (dali) or 300 (torch), 30 on the CPU].")
@click.option("--batch-size", type=click.IntRange(min=1),
              help="[default: on a GPU 64 (dali) or 256 (torch), 16 on the CPU]")
@click.option("--model", type=click.Choice(["resnet50", "small"]),
              help="[default: resnet50 on a GPU, small on the CPU]")
@click.option("--num-shards", default=1, show_default=True, type=click.IntRange(min=1),
              help="Simulated ranks: each reads its share; together they must read every record once.")
@click.option("--workers", type=click.IntRange(min=0),
              help="--framework torch: DataLoader worker processes per rank [default: 2 on the CPU, 8 on a GPU].")
@click.option("--mean", callback=_floats3, metavar="R G B",
              help="Per-channel mean to subtract [default: DLE's 123.68 116.28 103.53].")
@click.option("--std", callback=_floats3, metavar="R G B",
              help="Per-channel std to divide by [default: DLE's 58.395 57.120 57.385].")
@click.option("--compare-tf", is_flag=True, help="Also run the same augmentation through tf.data and compare (dali).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON document.")
def trainer_check(folder: str, split: str, framework: str, device: str, steps: int | None, batch_size: int | None,
                  model: str | None, num_shards: int, workers: int | None, mean: tuple[float, ...] | None,
                  std: tuple[float, ...] | None, compare_tf: bool, as_json: bool) -> None:
    """Read FOLDER's shards back through DALI or PyTorch into real training steps and prove the data trains.

    Every index must cover its shard exactly (entries contiguous from 0 to the
    file's size, as verify checks them; DALI checks nothing): otherwise one error
    line names the index, its line and the shard. Then every record read exactly
    once per epoch across --num-shards ranks, labels 0-based after the shift and
    matching the manifest's histogram, no batch of one repeated image,
    pixels normalised once, a finite loss, and a small fixed subset that is
    learned. --framework dali needs the `tf` and `dali` extras, --framework torch
    the `torch` extra; both run on the CPU without a GPU.
    Exit 0 when every check passes, 1 otherwise.
    """
    from imagenet_build.readback.checks import DLE_MEAN, DLE_STD, format_report

    mean, std = mean or DLE_MEAN, std or DLE_STD
    if framework == "torch":
        if compare_tf:
            raise click.UsageError("--compare-tf goes with --framework dali")
        from imagenet_build.readback.torch_check import trainer_check as run_torch

        result = run_torch(folder, split=split, device=device, steps=steps, batch_size=batch_size, model=model,
                           num_shards=num_shards, mean=mean, std=std, workers=workers)
    else:
        if workers is not None:
            raise click.UsageError("--workers goes with --framework torch")
        from imagenet_build.readback.dali import trainer_check as run

        result = run(folder, split=split, device="gpu" if device == "cuda" else device, steps=steps,
                     batch_size=batch_size, model=model, num_shards=num_shards, mean=mean, std=std,
                     compare_tf=compare_tf)
    _report_and_exit(result, as_json, format_report)


@cli.command()
@click.argument("source", type=click.Path(exists=True))
@click.option("--synsets", type=existing_file,
              help="Challenge synsets: XML of other synsets and boxes named as another challenge synset are skipped. "
              "[default: the 1000 ILSVRC2012 synsets]")
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="CSV file to write (atomically). [default: stdout]")
@click.option("--strict", is_flag=True, help="Fail on a malformed XML file instead of skipping it.")
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON on stdout (needs -o).")
def bboxes(source: str, synsets: str | None, output: str | None, strict: bool, as_json: bool) -> None:
    """Turn ImageNet's bounding-box XML into slim's CSV, like slim's process_bounding_boxes.

    SOURCE is the extracted <synset>/*.xml folder, ILSVRC2012_bbox_train_v2.tar.gz
    itself, or the folder holding it (finding no XML file is an error). Each box
    is scaled by the annotated size, ordered min/max, clamped to [0, 1] and
    dropped if empty; lines `<image>.JPEG,xmin,ymin,xmax,ymax` with 4 decimals,
    sorted. Counts go to stderr. A malformed XML file, one without a size or
    with a zero side is named and skipped (--strict: fails).
    """
    from imagenet_build.catalog.boxes import boxes_to_csv_lines
    from imagenet_build.catalog.classes import DEFAULT_LABELS_FILE, read_labels_file
    from imagenet_build.infra.atomic import write_atomic

    if as_json and not output:
        raise click.UsageError("--json needs -o: stdout would mix the CSV and the JSON")
    synset_list = read_labels_file(synsets or DEFAULT_LABELS_FILE)
    lines, counts, problems = boxes_to_csv_lines(source, synset_list, strict=strict)
    text = "".join(line + "\n" for line in lines)
    if output:
        write_atomic(output, text.encode())
    else:
        click.echo(text, nl=False)
    if as_json:
        _print_json({"counts": counts, "problems": problems, "output": output})
        return
    for p in problems:
        click.echo(f"skipped: {p['file']}: {p['problem']}", err=True)
    click.echo(
        f"{counts['xml_files']} XML files: {counts['saved_boxes']} boxes written from {counts['saved_files']} images; "
        f"skipped {counts['skipped_files']} files ({counts['bad_files']} unreadable) "
        f"and {counts['skipped_boxes']} boxes",
        err=True,
    )


@cli.command("prepare-val")
@click.argument("val_dir", type=existing_dir)
@click.option("--labels", type=existing_file,
              help="Synset of image i on line i. [default: shipped ILSVRC2012 validation labels]")
@click.option("--link", "method", flag_value="link", default=True,
              help="Hard-link into the folders; the flat files stay (default).")
@click.option("--copy", "method", flag_value="copy", help="Copy into the folders.")
@click.option("--move", "method", flag_value="move", help="Move into the folders.")
@click.option("--dry-run", is_flag=True, help="Say what would be done; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
def prepare_val(val_dir: str, labels: str | None, method: str, dry_run: bool, as_json: bool) -> None:
    """Put flat ILSVRC2012_val_*.JPEG files into <synset>/ folders, as slim's layout wants.

    convert never needs this (it reads the flat folder and the labels file).
    Safe to run twice, works on a partial set, never overwrites a file.
    """
    from imagenet_build.tools.prepare_val import prepare_validation

    done = prepare_validation(val_dir, labels, method, dry_run)
    if as_json:
        _print_json(done)
        return
    verb = {"link": "linked", "copy": "copied", "move": "moved"}[method]
    click.echo(f"{'would be ' if dry_run else ''}{verb}: {done['placed']}, "
               f"already in place: {done['already_in_place']}")
    for target in done["conflicts"]:
        click.echo(f"conflict (left alone): {target} exists with other content", err=True)
    if done["no_label"]:
        click.echo(f"no label for {len(done['no_label'])} file(s), left flat: {', '.join(done['no_label'][:5])}",
                   err=True)
    if done["conflicts"]:
        sys.exit(1)


class _LayoutChoice(click.Choice):
    """`sample --layout`: the layouts of the copies registered in sources (sample_layouts), listed in --help
    and checked; looked up when first needed, so that other commands do not import every copy's module."""

    def __init__(self) -> None:
        self.case_sensitive = True

    @property
    def choices(self) -> tuple[str, ...]:
        from imagenet_build.sources.copies import sample_layouts

        return tuple(sample_layouts())


@cli.command()
@click.argument("out", type=existing_dir)
@click.option("--classes", default=4, show_default=True, type=click.IntRange(min=1, max=1000))
@click.option("--per-class", default=12, show_default=True, type=click.IntRange(min=1), help="Train images per class.")
@click.option("--validation-per-class", default=4, show_default=True, type=click.IntRange(min=0))
@click.option("--min-size", default=64, show_default=True, type=click.IntRange(min=8),
              help="Smallest image side, pixels.")
@click.option("--max-size", default=160, show_default=True, type=click.IntRange(min=8),
              help="Largest image side, pixels.")
@click.option("--quality", default=90, show_default=True, type=click.IntRange(1, 100), help="JPEG quality.")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--tarballs", is_flag=True,
              help="Also write the three ILSVRC2012 archives (train tar-of-tars, validation tar, bbox .tar.gz).")
@click.option("--layout", default="ilsvrc", show_default=True, type=_LayoutChoice(),
              help="Write the same images as that copy of ImageNet lays them out (see convert --from): one "
              "for each copy the tool knows.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
def sample(out: str, as_json: bool, **options: Any) -> None:
    """Make a small ImageNet-shaped dataset in OUT to try the other commands on.

    OUT/train/<synset>/*.JPEG, flat OUT/validation/ILSVRC2012_val_*.JPEG with
    OUT/validation_labels.txt, OUT/labels.txt and OUT/bboxes.csv; includes CMYK,
    PNG-named-JPEG, grayscale, progressive and EXIF-rotated images.
    """
    from imagenet_build.tools.sample import convert_command, make_sample

    counts = make_sample(out, **options)
    if as_json:
        _print_json(dict(counts, out=str(out)))
        return
    special = ", ".join(f"{n} {k}" for k, n in sorted(counts["special"].items()))
    click.echo(
        f"{out}: {counts['train']} train and {counts['validation']} validation images in "
        f"{counts['classes']} classes, {counts['boxes']} boxes; special: {special}"
    )
    click.echo(f"convert it with: {convert_command(out, options['layout'])}")


def main() -> None:
    cli(prog_name="imagenet-build")
