"""`imagenet-build convert`: its options (their defaults and choices are the request's), one call, its report."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import click

from imagenet_build.cli.group import cli, input_file, input_folder, input_path, output_folder, print_json
from imagenet_build.engines import ENGINE_OPTIONS
from imagenet_build.request import DEFAULTS, ON_ERROR, QUALITY, RESIZE_FILTERS, RUNNER_HELP, RUNNERS

if TYPE_CHECKING:
    from imagenet_build.writer.summary import ConvertSummary


def engine_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Every engine's options (engines.ENGINE_OPTIONS: each engine declares its own), in their order."""
    for option in reversed(ENGINE_OPTIONS):
        if option.flag:
            command = click.option(option.flag_name, is_flag=True, help=option.help)(command)
        else:
            command = click.option(option.flag_name, default=option.default, multiple=option.multiple,
                                   metavar=option.metavar, show_default=option.show_default,
                                   help=option.help)(command)
    return command


@cli.command()
@click.option("--from", "from_paths", multiple=True, type=input_path,
              help="Any copy of ImageNet, recognised by its shape: the ILSVRC2012 archives (or a folder holding "
              "them), the folders extracted from them, ... Repeat for each file of one copy. Instead of "
              "--train-dir/--train-tar/--validation-dir/--validation-tar.")
@click.option("--subset", type=input_path,
              help="Only the images named in this file (original file names, one a line), or a shipped list: "
              "imagenet-1pct, imagenet-10pct (SimCLR's 12,811 / 128,116 train images). Labels keep their values; "
              "slim's shuffle and layout apply to the subset.")
@click.option("--real-labels", type=input_file,
              help="ReaL's real.json (google-research/reassessed-imagenet): each validation record also carries "
              "its reassessed labels, image/class/real_labels (1-based, none where ReaL gives none).")
@click.option("--train-dir", type=input_folder, help="Train images as <synset>/*.JPEG.")
@click.option(
    "--validation-dir",
    type=input_folder,
    help="Validation images: flat ILSVRC2012_val_%08d.JPEG (labelled from --validation-labels-file) "
    "or <synset>/*.JPEG folders; detected.",
)
@click.option("--train-tar", type=input_file,
              help="ILSVRC2012_img_train.tar, read in place (instead of --train-dir).")
@click.option("--validation-tar", type=input_file,
              help="ILSVRC2012_img_val.tar, read in place (instead of --validation-dir).")
@click.option("--output-dir", required=True, type=output_folder, help="Where shards and manifest.json go.")
@click.option("--bounding-box-file", type=input_file, help="slim's box CSV: <image>.JPEG,xmin,ymin,xmax,ymax.")
@click.option("--bbox-tar", type=input_path,
              help="ILSVRC2012_bbox_train_v2.tar.gz, the folder holding it, or the <synset>/*.xml folder "
              "extracted from it; read as `bboxes` reads it (finding no XML file is an error).")
@click.option("--train-shards", default=DEFAULTS.train_shards, show_default=True, type=click.IntRange(min=1))
@click.option("--validation-shards", default=DEFAULTS.validation_shards, show_default=True, type=click.IntRange(min=1))
@click.option(
    "--layout-threads",
    default=DEFAULTS.layout_threads,
    show_default=True,
    type=click.IntRange(min=1),
    help="slim's num_threads: fixes which image lands in which shard (not how many processes run). "
    "Shard counts must be multiples of it.",
)
@click.option(
    "--workers",
    default=DEFAULTS.workers,
    type=click.IntRange(min=0),
    help="Processes that write shards; 0 (the default): one per core. The output is the same for any value.",
)
@click.option("--labels-file", type=input_file,
              help="Synsets, one a line; label = line number. [default: the 1000 ILSVRC2012 synsets]")
@click.option("--metadata-file", type=input_file,
              help="<synset>\\t<text> lines. [default: shipped imagenet_metadata.txt]")
@click.option(
    "--validation-labels-file",
    type=input_file,
    help="Synset of validation image i on line i. [default: shipped ILSVRC2012 validation labels]",
)
@click.option("--index-dir", type=output_folder, help="Where DALI indexes go. [default: OUTPUT_DIR/dali_idx]")
@click.option(
    "--on-error",
    type=click.Choice(ON_ERROR),
    default=DEFAULTS.on_error,
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
@click.option("--runner", type=click.Choice(RUNNERS), default=DEFAULTS.runner, show_default=True,
              help="What runs the shard tasks. " + RUNNER_HELP + ". The output is the same for each.")
@engine_options
@click.option("--resize", help="Resized builds instead of the full-size one: shorter:N (shorter side to N, aspect "
              "kept), longer:N (longer side to at most N), or several sizes in one pass, e.g. shorter:160,224,288; "
              "each size is a complete build in OUTPUT_DIR/<shorter-N|longer-N>/. Same shuffle and shards as full "
              "size. N is 1 to 13,377 (an N x N image within Pillow's decompression-bomb limit).")
@click.option("--quality", type=click.IntRange(*QUALITY), help="JPEG quality of resized images. [default: 90]")
@click.option("--resize-filter", type=click.Choice(RESIZE_FILTERS), help="The filter resized images are made with: "
              "catmull-rom (0.2-0.6 ms less an image), or lanczos3 (sharper: 0.2-0.4 dB more PSNR). "
              "[default: catmull-rom]")
@click.option("--resize-larger-only/--resize-all", default=DEFAULTS.resize_larger_only,
              help="Store images already within the size untouched (default), or resize and re-encode every image.")
@click.option("--exif-transpose", is_flag=True, help="Turn resized images upright by their EXIF orientation first "
              "(default: ignore it, as TensorFlow's decoder and slim do).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
def convert(as_json: bool, **options: Any) -> None:
    """Convert any copy of ImageNet into shuffled, sharded TFRecords in slim's format: with --from, the ILSVRC2012
    archives or the folders extracted from them, Kaggle's zip, Hugging Face's .tar.gz or parquet files, the
    face-blurred release, WebDataset shards, or ImageNetV2, ImageNet-A, -R or -Sketch; any class folders with
    --classes-from-folders.

    Writes OUTPUT_DIR/{train,validation}-NNNNN-of-SSSSS, a DALI index per shard
    and manifest.json (written last). Running the same command again resumes:
    shards the manifest lists, whose sha256 and figures still match, are kept.
    """
    from imagenet_build.api import convert as run_convert

    summary = run_convert(**options)
    if as_json:
        print_json(summary)
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


def _print_build(summary: ConvertSummary, indent: str = "") -> None:
    """One build's lines of convert's report."""
    from imagenet_build.sources.copy_rules import SHOWN

    def echo(line: str) -> None:
        click.echo(indent + line)

    for split, s in summary["splits"].items():
        echo(f"{split}: {s['records']} records in {s['shards']} shards ({s['layout']} input, {s['images']} images)")
    echo(
        f"shards written: {summary['shards_written']}, kept from before: {summary['shards_kept']}; "
        f"{summary['bytes'] / 1e6:.1f} MB in {summary['seconds']:.1f} s"
        + (f" ({summary['images_per_second']:.0f} images/s)" if summary["images_per_second"] else "")
    )
    if "resized" in summary:
        kept = summary["records"] - summary["resized"]
        echo(f"resized: {summary['resized']} of {summary['records']} images"
             + (f"; {kept} within the size, stored as the full-size build stores them" if kept else ""))
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
    for skipped in summary["skipped"]:
        echo(f"skipped: {skipped['file']}: {skipped['reason']}")
    if indent:
        echo(f"manifest: {summary['manifest']}")

