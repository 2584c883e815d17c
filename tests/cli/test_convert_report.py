"""cli/convert.py's readable report of one build, line for line, from a summary as convert returns it (the runs that
make real summaries: tests/writer/test_builds.py, tests/encode/test_resize.py)."""

import pytest

from imagenet_build.cli.convert import _print_build
from imagenet_build.sources.copy_rules import SHOWN


def summary(**changes):
    """A build's summary, as writer/summary.py's ConvertSummary holds it (2.35 MB: shown as 2.4, a hair less as 2.3)."""
    base = {
        "splits": {"train": {"records": 40, "shards": 4, "layout": "folders", "images": 41},
                   "validation": {"records": 8, "shards": 2, "layout": "flat", "images": 8}},
        "shards_written": 5, "shards_kept": 1, "bytes": 2_350_000, "seconds": 3.26, "images_per_second": 14.72,
        "records": 48, "reencoded": [], "skipped": [], "manifest": "out/manifest.json",
    }
    return dict(base, **changes)


def printed(capsys, build, indent=""):
    _print_build(build, indent)
    return capsys.readouterr().out.splitlines()


def test_a_build_is_its_splits_then_its_shards_bytes_and_speed(capsys):
    assert printed(capsys, summary()) == [
        "train: 40 records in 4 shards (folders input, 41 images)",
        "validation: 8 records in 2 shards (flat input, 8 images)",
        "shards written: 5, kept from before: 1; 2.4 MB in 3.3 s (15 images/s)",
    ]
    assert printed(capsys, summary(images_per_second=0, splits={}))[-1] == \
        "shards written: 5, kept from before: 1; 2.4 MB in 3.3 s"


def test_a_build_of_a_size_says_how_many_images_were_resized_and_its_manifest(capsys):
    lines = printed(capsys, summary(resized=30), indent="  ")
    assert lines[3:] == ["  resized: 30 of 48 images; 18 within the size, stored as the full-size build stores them",
                         "  manifest: out/manifest.json"]
    assert all(line.startswith("  ") for line in lines)
    assert printed(capsys, summary(resized=48))[3:] == ["resized: 48 of 48 images"]


def test_reencoded_images_are_counted_by_reason_named_up_to_the_shown_number_with_notes_and_skips(capsys):
    reencoded = [{"file": f"n01/{i:02d}.JPEG", "reencoded": "CMYK" if i % 2 else "PNG", "note": None}
                 for i in range(SHOWN + 2)]
    reencoded += [{"file": "n01/kept.JPEG", "reencoded": None, "note": "EXIF orientation 6 ignored"}]
    skipped = [{"file": "n02/x.JPEG", "reason": "not an image"}]
    lines = printed(capsys, summary(reencoded=reencoded, skipped=skipped))
    assert lines[3] == f"re-encoded as RGB JPEG: {SHOWN + 2} (CMYK, PNG)"
    assert lines[4:4 + SHOWN] == [f"re-encoded: n01/{i:02d}.JPEG: {'CMYK' if i % 2 else 'PNG'}" for i in range(SHOWN)]
    assert lines[4 + SHOWN:] == ["re-encoded: 2 more (--json lists every one)",
                                 "note: n01/kept.JPEG: EXIF orientation 6 ignored",
                                 "skipped: n02/x.JPEG: not an image"]


@pytest.mark.parametrize("count", [SHOWN, 1])
def test_no_more_line_when_every_reencoded_image_is_named(capsys, count):
    reencoded = [{"file": f"{i}.JPEG", "reencoded": "grayscale", "note": ""} for i in range(count)]
    lines = printed(capsys, summary(reencoded=reencoded))
    assert lines[3] == f"re-encoded as RGB JPEG: {count} (grayscale)" and len(lines) == 4 + count
    assert lines[-1] == f"re-encoded: {count - 1}.JPEG: grayscale"


def test_every_engines_option_is_a_click_option_as_the_engine_declares_it():
    """cli/convert.py's options from the engines' declarations (engines.ENGINE_OPTIONS), in their order."""
    import click

    from imagenet_build.cli.convert import engine_options
    from imagenet_build.engines import ENGINE_OPTIONS

    command = click.command()(engine_options(lambda **given: given))
    assert [param.name for param in command.params] == [option.name for option in ENGINE_OPTIONS]
    for param, option in zip(command.params, ENGINE_OPTIONS):
        assert (param.opts, param.help, param.is_flag, param.multiple) == (
            [option.flag_name], option.help, option.flag, option.multiple), option.name
        if not option.flag:
            assert (param.default, param.metavar, param.show_default) == (
                option.default, option.metavar, option.show_default), option.name
    assert command.main(["--spark-conf", "a=b", "--shared-filesystem"], standalone_mode=False) == {
        "beam_options": "", "spark_master": "local[*]", "spark_conf": ("a=b",), "shared_filesystem": True}
