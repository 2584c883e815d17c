"""`imagenet-build report`: the page that pictures a build."""

from __future__ import annotations

import sys

import click

from imagenet_build.cli.group import build_folder, cli, output_file, print_json
from imagenet_build.report import PER_CLASS


def _classes(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """--classes checked as the report checks it (report.sample.classes_given), refused as click refuses a value."""
    from imagenet_build.infra.errors import UsageError
    from imagenet_build.report.page_sample import classes_given

    try:
        classes_given(value)
    except UsageError:
        raise click.BadParameter("a number of classes (1 or more) or 'all'") from None
    return value


@cli.command()
@click.argument("folder", type=build_folder)
@click.option("-o", "--output", type=output_file,
              help="The HTML file to write (atomically; - for stdout). [default: FOLDER/report.html]")
@click.option("--per-class", default=PER_CLASS, show_default=True, type=click.IntRange(min=1),
              help="Thumbnails in each class's contact sheet.")
@click.option("--classes", callback=_classes, metavar="K|all",
              help="The classes given a contact sheet: K spread over the labels, or all. "
              "[default: every class of a build of up to 50, else 24]")
@click.option("--verify", "run_verify", is_flag=True,
              help="Run verify now and show its result (else FOLDER/verify.json, verify --json's output, if there).")
@click.option("--workers", default=0, type=click.IntRange(min=0), help="--verify's processes; 0: one per core.")
@click.option("--json", "as_json", is_flag=True, help='Print {"ok", "page", "builds", "problems", "read"} as JSON.')
def report(folder: str, output: str | None, per_class: int, classes: str | None, run_verify: bool, workers: int,
           as_json: bool) -> None:
    """Write one HTML page picturing the build in FOLDER (or each size of a resized build).

    The page holds everything inline and opens from disk with no network: the
    build's figures from manifest.json; verify's result (FOLDER/verify.json, or
    --verify); trainer-check's (FOLDER/trainer-check.json and the picture its
    "show" names); charts of the records per class, image sizes, encoded bytes
    and aspect ratios; and a contact sheet per class: thumbnails decoded from
    the records, captioned with the stored label, synset and text, boxes drawn.
    Reads only what it shows: the DALI indexes, a sample of records' heads, and
    the records it shows (seconds for a full ImageNet build). Needs the `report`
    extra (matplotlib). Exit 1 when the page lists a problem (verify's, or a
    record it could not read), 0 otherwise.
    """
    from imagenet_build.api import report as run_report

    if output == "-" and as_json:
        raise click.UsageError("--json needs -o FILE: stdout would mix the page and the JSON")
    result = run_report(folder, output, per_class=per_class, classes=classes, verify=run_verify, workers=workers)
    if as_json:
        print_json(result)
    else:
        where = "the page to stdout" if output == "-" else result["page"]
        click.echo(f"wrote {where}: {len(result['builds'])} build(s)", err=output == "-")
    problems = result["problems"]
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        click.echo(f"error: {problems[0]}{more}; the page lists them: {result['page']}", err=True)
        sys.exit(1)
