"""`report`: the page a build gets, looked at as a user would: in a real browser, and tile by tile.

The thumbnails are the records' images resized (a planted image, pixel for pixel), captioned with what the
records store (a build whose labels file swaps two classes shows it), the boxes drawn where the records put
them; the page loads nothing from elsewhere and every image on it loads.
"""

import base64
import io
import json
import re
import shutil

import pytest
from PIL import Image, ImageStat

from conftest import run_cli, run_process, sample_args

pytest.importorskip("matplotlib")

TILE = re.compile(r'<span class=tile><span class=pic><img src="data:image/png;base64,([^"]+)" width=(\d+) height=(\d+) '
                  r'alt="([^"]*)">(.*?)</span><br>(.*?)<br><small>')
BOX = re.compile(r'left:([\d.]+)%;top:([\d.]+)%;width:([\d.]+)%;height:([\d.]+)%')


def tiles(html):
    """[(image, alt "shard #record", boxes [(left, top, width, height) %], caption)] of every thumbnail."""
    found = []
    for data, width, height, alt, boxes, caption in TILE.findall(html):
        image = Image.open(io.BytesIO(base64.b64decode(data)))
        assert image.size == (int(width), int(height))
        found.append((image, alt, [tuple(map(float, b)) for b in BOX.findall(boxes)], caption))
    return found


def make_page(folder, *args, code=0):
    result = run_cli("report", folder, *args)
    assert result.exit_code == code, result.output
    return (folder / "report.html").read_text() if "-o" not in args else None


def test_a_thumbnail_is_the_records_image_resized(tmp_path):
    np = pytest.importorskip("numpy")
    from imagenet_build import write_arrays

    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (6, 150, 200, 3), dtype=np.uint8)  # larger than a thumbnail: resized
    images[3] = 0
    images[3, 40:110, 50:150] = (255, 128, 0)  # a planted picture: an orange block on black
    out = tmp_path / "arrays"
    write_arrays(images, [0, 1, 0, 1, 0, 1], out, "train", 2, class_names=["cat", "dog"], lossless=True)
    shown = tiles(make_page(out))
    assert len(shown) == 6
    for image, alt, _, caption in shown:
        number = int(re.search(r"train_(\d{8})\.png", caption)[1])
        expected = Image.fromarray(images[number]).resize((128, 96), Image.Resampling.BICUBIC)  # 128 px at most
        assert image.convert("RGB").tobytes() == expected.tobytes(), alt
        assert f"label {1 + number % 2} &middot; {['cat', 'dog'][number % 2]}" in caption
    planted = next(image for image, _, _, caption in shown if "train_00000003.png" in caption).convert("RGB")
    assert planted.getpixel((64, 48)) == (255, 128, 0) and planted.getpixel((5, 5)) == (0, 0, 0)


def test_captions_and_boxes_are_the_records(build):
    """Every tile: the label, synset and text stored in its record, its boxes where the record puts them."""
    from imagenet_build.format.record_schema import decode_example
    from imagenet_build.format.tfrecord import unframe

    shown = tiles(make_page(build, "--per-class", 3))
    assert len(shown) == 4 * 3  # the sample's 4 classes, 3 each
    boxed = 0
    for _, alt, boxes, caption in shown:
        shard, number = alt.split(" #")
        offset, size = map(int, (build / "dali_idx" / f"{shard}.idx").read_text().splitlines()[int(number)].split())
        with open(build / shard, "rb") as f:
            f.seek(offset)
            fields = decode_example(unframe(f.read(size)))
        label, synset = fields["image/class/label"][0], fields["image/class/synset"][0].decode()
        assert caption.startswith(f"label {label} &middot; {synset}<br>{fields['image/class/text'][0].decode()}")
        expected = [(x0 * 100, y0 * 100, (x1 - x0) * 100, (y1 - y0) * 100) for x0, y0, x1, y1 in zip(
            *(fields[f"image/object/bbox/{c}"] for c in ("xmin", "ymin", "xmax", "ymax")))]
        assert len(boxes) == len(expected)
        assert [v for box in boxes for v in box] == pytest.approx([v for box in expected for v in box], abs=0.006)
        boxed += bool(boxes)
    assert boxed  # the sample's boxes are drawn


def test_a_labels_file_that_swaps_two_classes_shows_in_the_captions_and_is_a_problem_of_the_build(sample_copy,
                                                                                                    tmp_path):
    labels = (sample_copy / "labels.txt").read_text().splitlines()
    labels[0], labels[1] = labels[1], labels[0]
    (sample_copy / "labels.txt").write_text("\n".join(labels) + "\n")
    out = tmp_path / "swapped"
    assert run_cli(*sample_args(sample_copy, out, "--workers", 1)).exit_code == 0
    result = run_cli("report", out, "--json")
    assert result.exit_code == 1 and json.loads(result.stdout)["problems"] == [
        f"{out / 'manifest.json'}: the classes are not in ImageNet's order: label 1 is n01443537, which ImageNet's "
        "order labels 2 (2 of 4 classes out of place): a labels file in another order? Convert with the shipped "
        "labels file, or one in its order"]
    html = (out / "report.html").read_text()
    assert "<h3>Problems this page found</h3>" in html and "not in ImageNet&#x27;s order: label 1" in html
    captions = [caption for _, _, _, caption in tiles(html)]
    tench = [c for c in captions if "n01440764" in c]
    goldfish = [c for c in captions if "n01443537" in c]
    assert tench and all(c.startswith("label 2 &middot; n01440764") and "ILSVRC's label: 1" in c for c in tench)
    assert goldfish and all(c.startswith("label 1 &middot; n01443537") and "ILSVRC's label: 2" in c for c in goldfish)
    assert not [c for c in captions if "ILSVRC's label" in c and c not in tench + goldfish]


@pytest.mark.slow
def test_a_resized_builds_page_shows_each_size(sample_dir, converted, tmp_path):
    out = tmp_path / "resized"
    assert run_cli(*sample_args(sample_dir, out, "--resize", "shorter:40,64", "--workers", 1)).exit_code == 0
    html = make_page(out)
    assert "<h2>shorter-40</h2>" in html and "<h2>shorter-64</h2>" in html
    manifests = {size: json.loads((out / size / "manifest.json").read_text()) for size in ("shorter-40", "shorter-64")}
    for size, manifest in manifests.items():  # each size's figures say how many of its images were resized
        section = html.split(f"<h2>{size}</h2>", 1)[1]
        for split in ("train", "validation"):
            resized = sum(s["resized"] for s in manifest["shards"] if s["split"] == split)
            row = re.search(rf"<tr><td class=l>{split}</td>((?:<td>[^<]*</td>)+)</tr>", section).group(1)
            assert re.findall(r"<td>([^<]*)</td>", row)[4] == f"{resized:,}", (size, split, row)
    full = tmp_path / "full-size"
    shutil.copytree(converted, full)
    assert "<th>resized</th>" in html and "<th>resized</th>" not in make_page(full)  # a full-size build resizes none
    assert len(tiles(html)) == 2 * 4 * 8
    rerun = run_cli(*sample_args(sample_dir, out, "--resize", "shorter:40,64", "--workers", 1))
    assert rerun.exit_code == 0, rerun.output  # the page beside the size folders is no stranger


def chromium():
    path = shutil.which("chromium")
    if not path:
        pytest.skip("no chromium browser: Debian's package `chromium` (apt-get install chromium)")
    pytest.importorskip("playwright.sync_api")
    return path


def trainer_picture(build):
    """trainer-check's JSON as trainer-check --json --show writes it into the folder, and its picture."""
    picture = Image.new("RGB", (96, 64), (20, 200, 40))
    picture.save(build / "trainer-check.png")
    (build / "trainer-check.json").write_text(json.dumps(
        {"ok": True, "checks": [{"name": "epoch", "ok": True, "detail": "every record once"}],
         "framework": "dali", "show": "trainer-check.png"}))


@pytest.mark.slow
def test_the_page_in_a_browser_loads_nothing_from_elsewhere(build, tmp_path):
    from playwright.sync_api import sync_playwright

    executable = chromium()
    verify = run_process("verify", build, "--json", "--workers", 1)
    (build / "verify.json").write_text(verify.stdout)
    trainer_picture(build)
    page_file = tmp_path / "page.html"
    done = run_process("report", build, "-o", page_file)
    assert done.returncode == 0 and done.stdout.startswith(f"wrote {page_file}"), done.stderr
    requests, errors = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})

            def route(r):
                requests.append(r.request.url)
                if r.request.url.startswith(("file:", "data:")):
                    r.continue_()
                else:
                    r.abort()

            page.route("**/*", route)
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(page_file.as_uri(), wait_until="load")
            widths = page.eval_on_selector_all("img", "imgs => imgs.map(i => [i.complete, i.naturalWidth, i.alt])")
            shot = Image.open(io.BytesIO(page.screenshot(full_page=True))).convert("L")
        finally:
            browser.close()
    assert [u for u in requests if not u.startswith(("file:", "data:"))] == []
    assert errors == []
    assert len(widths) == 4 * 8 + 4 + 1 + 1  # thumbnails, charts, trainer-check's picture, verify's warning
    assert all(complete and width > 0 for complete, width, _ in widths), widths
    assert [w for _, w, alt in widths if alt == "the batches trained on"] == [96]
    assert ImageStat.Stat(shot).var[0] > 100  # not blank
