"""`imagenet-build verify`, `index` and `trainer-check`: the verbs that judge or read a build."""

from __future__ import annotations

import sys
from typing import Any, cast

import click

from imagenet_build.cli.group import (
    build_folder,
    cli,
    input_folder,
    input_path,
    output_file,
    output_folder,
    print_json,
    report_and_exit,
)


@cli.command()
@click.argument("folder", type=build_folder)
@click.option("--index-dir", type=input_folder,
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
    from imagenet_build.api import verify as run_verify
    from imagenet_build.verify.verify_result import format_report

    result = run_verify(folder, index_dir=index_dir, quick=quick, deep=deep, expect_imagenet=expect_imagenet,
                        workers=workers)
    report_and_exit(result, as_json, format_report)


@cli.command()
@click.argument("inputs", nargs=-1, required=True, type=input_path)
@click.option("--index-dir", type=output_folder,
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
    from imagenet_build.api import index as run_index

    result = run_index(inputs, index_dir=index_dir, workers=workers)
    if as_json:
        print_json(result)
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


def _writable(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """--show's file: refused in one line before the run, not after minutes of training (one that cannot be
    written, or that would land on a build's file: format/output_guard.py)."""
    from imagenet_build.format.output_guard import PICTURE, check_output_file

    if value is not None:
        check_output_file(value, "--show", may_write=[PICTURE])
    return value


def _trainers() -> Any:
    """The trainer registry (trainercheck/trainers.py), every trainer registered."""
    import imagenet_build.trainercheck  # noqa: F401  (importing the package registers every trainer)
    from imagenet_build.trainercheck import trainers

    return trainers


def _from_registry(param: click.Parameter, trainers: Any) -> None:
    """--framework's choices and the help of the options whose defaults differ by trainer, from the registry."""
    if param.name == "framework":
        param.type = click.Choice(trainers.framework_choices())
        cast(click.Option, param).help = trainers.framework_help()
    elif param.name == "workers":
        cast(click.Option, param).help = f"{trainers.meanings('workers')} {trainers.default_help('workers')}."
    elif param.name == "compare_tf":
        cast(click.Option, param).help = ("Also run the same augmentation through tf.data and compare "
                                          f"({', '.join(trainers.takes('compare_tf'))}).")
    elif param.name in ("steps", "batch_size", "model"):
        what = {"steps": "Training steps ", "batch_size": "", "model": ""}[param.name]
        cast(click.Option, param).help = f"{what}{trainers.default_help(param.name)}"


class _TrainerCheck(_ChannelOptions):
    """trainer-check's command: the trainer registry fills its --framework choices and the defaults its help
    states when it is first parsed or its help shown, not when the command line is imported (that would import
    every trainer module for every verb and for `imagenet-build --help`)."""

    _filled = False

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        if not self._filled:
            trainers = _trainers()
            for param in self.params:
                _from_registry(param, trainers)
            self._filled = True
        return super().get_params(ctx)


@cli.command("trainer-check", cls=_TrainerCheck)
@click.argument("folder", type=build_folder)
@click.option("--split", default="train", show_default=True, callback=_split_name,
              help="The split whose shards to read: train, validation, or any other the folder holds (test, ...).")
@click.option("--framework", default="dali", show_default=True)  # choices and help: _from_registry
@click.option("--device", type=click.Choice(["auto", "gpu", "cuda", "cpu"]), default="auto", show_default=True,
              help="auto: the GPU when the framework sees one, else the CPU (gpu and cuda are the same).")
@click.option("--steps", type=click.IntRange(min=1))
@click.option("--batch-size", type=click.IntRange(min=1))
@click.option("--model", type=click.Choice(["resnet50", "small"]))
@click.option("--num-shards", default=1, show_default=True, type=click.IntRange(min=1),
              help="Simulated ranks: each reads its share; together they must read every record once.")
@click.option("--workers", type=click.IntRange(min=0))
@click.option("--mean", callback=_floats3, metavar="R G B",
              help="Per-channel mean to subtract [default: DLE's 123.68 116.28 103.53].")
@click.option("--std", callback=_floats3, metavar="R G B",
              help="Per-channel std to divide by [default: DLE's 58.395 57.120 57.385].")
@click.option("--compare-tf", is_flag=True)
@click.option("--show", type=output_file, callback=_writable, metavar="FILE.png",
              help="Also draw the first training steps' batches as fed to the model, un-normalised and captioned "
                   "with their labels, and the overfit check's fixed subset, into this PNG.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON document.")
def trainer_check(folder: str, split: str, framework: str, device: str, steps: int | None, batch_size: int | None,
                  model: str | None, num_shards: int, workers: int | None, mean: tuple[float, ...] | None,
                  std: tuple[float, ...] | None, compare_tf: bool, show: str | None, as_json: bool) -> None:
    """Read FOLDER's shards back through DALI or PyTorch into real training steps and prove the data trains.

    Every index must cover its shard exactly (entries contiguous from 0 to the
    file's size, as verify checks them; DALI checks nothing) and the split's
    shards must be whole: otherwise one error line names the file. Then every
    record read exactly once per epoch across --num-shards ranks, labels
    0-based after the shift and matching the manifest's histogram, no batch of
    one repeated image, pixels normalised once, a finite loss, and a small
    fixed subset that is learned; --show FILE.png draws what training was fed.
    --framework dali trains through TensorFlow (dali-tf) where it and DALI's TF
    plugin are installed, else through PyTorch (dali-torch); every framework
    runs on the CPU without a GPU.
    Exit 0 when every check passes, 1 otherwise.
    """
    from imagenet_build.infra.workers import progress_note
    from imagenet_build.readers.normalisation import DLE_MEAN, DLE_STD
    from imagenet_build.trainercheck.checks import format_report

    trainers = _trainers()
    trainer = trainers.for_framework(framework)
    given = {"steps": steps, "batch_size": batch_size, "model": model, "workers": workers,
             "compare_tf": compare_tf or None}
    taken = {o.name: o for o in trainer.options}
    for name, value in given.items():
        flag = f"--{name.replace('_', '-')}"
        if value is not None and name not in taken:
            picked = f" (here --framework {framework} is {trainer.name})" if framework != trainer.name else ""
            raise click.UsageError(f"{flag} goes with --framework {' or '.join(trainers.takes(name))}{picked}")
        if isinstance(value, int) and not isinstance(value, bool) and value < taken[name].least:
            raise click.UsageError(f"{flag} {value}: {trainer.name} takes at least {taken[name].least}")
    options = {name: value for name, value in given.items() if value is not None}
    progress_note(f"trainer-check {folder}: starting {trainer.title}; its libraries take seconds to load")
    result = trainer.run(folder, split=split, device=device, framework=framework, num_shards=num_shards,
                         mean=mean or DLE_MEAN, std=std or DLE_STD, show=show, **options)
    report_and_exit(result, as_json, format_report)
