"""`imagenet-build bboxes`, `prepare-val`, `sample` and `tfds`: the tools around a build."""

from __future__ import annotations

import sys
from typing import Any

import click

from imagenet_build.cli.group import (
    PathOf,
    build_folder,
    cli,
    input_file,
    output_file,
    output_folder,
    print_json,
)
from imagenet_build.request import QUALITY


@cli.command()
@click.argument("source", type=PathOf("reads", exists=True))
@click.option("--synsets", type=input_file,
              help="Challenge synsets: XML of other synsets and boxes named as another challenge synset are skipped. "
              "[default: the 1000 ILSVRC2012 synsets]")
@click.option("-o", "--output", type=output_file,
              help="CSV file to write (atomically; - for stdout). [default: stdout]")
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
    from imagenet_build.format.output_guard import check_output_file
    from imagenet_build.infra import write_door

    output = None if output == "-" else output  # stdout, as without -o
    if as_json and not output:
        raise click.UsageError("--json needs -o: stdout would mix the CSV and the JSON")
    if output is not None:
        check_output_file(output, "bboxes -o", inputs=[source] + ([synsets] if synsets else []))
    synset_list = read_labels_file(synsets or DEFAULT_LABELS_FILE)
    lines, counts, problems = boxes_to_csv_lines(source, synset_list, strict=strict)
    text = "".join(line + "\n" for line in lines)
    if output:
        write_door.write_bytes(output, text.encode())
    else:
        click.echo(text, nl=False)
    if as_json:
        print_json({"counts": counts, "problems": problems, "output": output})
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
@click.argument("val_dir", type=output_folder)
@click.option("--labels", type=input_file,
              help="Synset of image i on line i. [default: shipped ILSVRC2012 validation labels]")
@click.option("--link", "method", flag_value="link", default=True,
              help="Hard-link into the folders; the flat files stay (default).")
@click.option("--copy", "method", flag_value="copy", help="Copy into the folders.")
@click.option("--move", "method", flag_value="move", help="Move into the folders.")
@click.option("--dry-run", is_flag=True, help="Say what would be done; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
def prepare_val(val_dir: str, labels: str | None, method: str, dry_run: bool, as_json: bool) -> None:
    """Put flat ILSVRC2012_val_*.JPEG files into <synset>/ folders, the arrangement slim reads.

    convert never needs this (it reads the flat folder and the labels file).
    Safe to run twice, works on a partial set, never overwrites a file.
    """
    from imagenet_build.tools.prepare_val import prepare_validation

    done = prepare_validation(val_dir, labels, method, dry_run)
    if as_json:
        print_json(done)
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


class _CopyKindChoice(click.Choice):
    """`sample --layout`: the kinds of copy registered in sources (sample_kinds), listed in --help
    and checked; looked up when first needed, so that other commands do not import every copy's module."""

    def __init__(self) -> None:
        self.case_sensitive = True

    @property
    def choices(self) -> tuple[str, ...]:
        from imagenet_build.sources.copies import sample_kinds

        return tuple(sample_kinds())


@cli.command()
@click.argument("out", type=output_folder)
@click.option("--classes", default=4, show_default=True, type=click.IntRange(min=1, max=1000))
@click.option("--per-class", default=12, show_default=True, type=click.IntRange(min=1), help="Train images per class.")
@click.option("--validation-per-class", default=4, show_default=True, type=click.IntRange(min=0))
@click.option("--min-size", default=64, show_default=True, type=click.IntRange(min=8),
              help="Smallest image side, pixels.")
@click.option("--max-size", default=160, show_default=True, type=click.IntRange(min=8),
              help="Largest image side, pixels.")
@click.option("--quality", default=90, show_default=True, type=click.IntRange(*QUALITY), help="JPEG quality.")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--tarballs", is_flag=True,
              help="Also write the three ILSVRC2012 archives (train tar-of-tars, validation tar, bbox .tar.gz).")
@click.option("--layout", "kind", default="ilsvrc", show_default=True, type=_CopyKindChoice(),
              help="Write the same images as that copy of ImageNet lays them out (see convert --from): one "
              "for each copy the tool knows.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
def sample(out: str, as_json: bool, **options: Any) -> None:
    """Make a small ImageNet-shaped dataset in OUT to try the other commands on.

    OUT/train/<synset>/*.JPEG, flat OUT/validation/ILSVRC2012_val_*.JPEG with
    OUT/validation_labels.txt, OUT/labels.txt and OUT/bboxes.csv; includes CMYK,
    PNG-named-JPEG, grayscale, progressive and EXIF-rotated images.
    """
    from imagenet_build.tools.sample_dataset import convert_command, make_sample

    counts = make_sample(out, **options)
    if as_json:
        print_json(dict(counts, out=str(out)))
        return
    special = ", ".join(f"{n} {k}" for k, n in sorted(counts["special"].items()))
    click.echo(
        f"{out}: {counts['train']} train and {counts['validation']} validation images in "
        f"{counts['classes']} classes, {counts['boxes']} boxes; special: {special}"
    )
    click.echo(f"convert it with: {convert_command(out, options['kind'])}")


@cli.command()
@click.argument("folder", type=build_folder)
@click.option("--json", "as_json", is_flag=True, help='Print {"ok", "folder", "written", "splits"} as JSON.')
def tfds(folder: str, as_json: bool) -> None:
    """Make an existing build a TensorFlow Datasets folder: write FOLDER/features.json and dataset_info.json.

    convert and write_arrays write both with every complete build; this adds them to a build made
    before they did, from its manifest.json, touching nothing else. Then, in Python:
    tfds.builder_from_directory(FOLDER).as_dataset(split="train[:10%]"). A --resize build: name each
    size's folder. `imagenet-build verify FOLDER` checks them against the shards.
    """
    from imagenet_build.writer.tfds_files import add_tfds_files

    result = add_tfds_files(folder)
    if as_json:
        print_json(result)
        return
    figures = ", ".join(f"{split}: {f['records']} records in {f['shards']} shards"
                        for split, f in result["splits"].items())
    click.echo(f"{result['folder']}: wrote {' and '.join(result['written'])} ({figures})")
    click.echo(f"open it with: tfds.builder_from_directory({result['folder']!r})")
