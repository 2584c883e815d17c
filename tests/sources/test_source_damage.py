"""convert --from on damaged copies of every copy kind `sample --layout` writes: one line, nothing wrong built.

Each copy kind `sources.copies` registers is written small by `sample --layout`, then each kind of
damage is applied to a fresh copy of it, and `convert --from` must exit 1 with one `error:` line
naming the file and the member, no traceback, the copy unchanged, and nothing but what a clean
build writes under a final name in the output folder. Which damage applies to which copy kind is
the one table DAMAGES below: a copy kind registered without its row fails
test_every_registered_copy_kind_declares_every_damage, so a new copy is covered by registering it.
"""

import gzip
import hashlib
import json
import shutil
import struct

import pytest

from conftest import run_cli, shard_files, tree_digest
from imagenet_build.sources.copies import sample_kinds
from tar_damages import (
    SYNSETS,
    blurred_damage,
    cut,
    hf_damage,
    ilsvrc_damage,
    not_utf8,
    renamed_first,
    tar_bytes,
    tar_members,
    wds_damage,
)

SHARDS = ["--train-shards", 2, "--validation-shards", 1, "--layout-threads", 1, "--workers", 1]
KINDS = ("member swapped", "size lie", "CRC lie (stored)", "CRC lie (deflated)", "corrupted payload (stored)",
         "truncated", "empty piece", "missing piece", "name not UTF-8", "label out of range", "label null",
         "path null", "label disagreeing", "duplicate")


# ------------------------------------------------------------------ kaggle: the zip


def central_entries(path):
    """{member name: (where its central entry starts, where its Zip64 extra's values start)} of a zip."""
    from imagenet_build.sources.zips import CENTRAL, end_record

    data = path.read_bytes()
    with open(path, "rb") as f:
        cd_offset, _, count = end_record(f, len(data), str(path))
    entries, pos = {}, cd_offset
    for _ in range(count):
        name_len, extra_len, comment_len = struct.unpack_from("<3H", data, pos + 28)
        name = data[pos + 46:pos + 46 + name_len].decode()
        entries[name] = (pos, pos + 46 + name_len + 4)  # the extra field: (kind 1, length 24) then 3 Q
        pos += CENTRAL.size + name_len + extra_len + comment_len
    return entries


def zip_image(members, split, method, synset=SYNSETS[0]):
    """The name of the first image of `split` ("train"/"val") stored with `method` (0 stored, 8 deflated)."""
    folder = f"ILSVRC/Data/CLS-LOC/{split}/" + (f"{synset}/" if split == "train" else "")
    return next(n for n, _, m, _ in members if n.startswith(folder) and n.endswith(".JPEG") and m == method)


def kaggle_damage(kind, root):
    from imagenet_build.sources.kaggle_listing import ZIP_NAME
    from imagenet_build.sources.zips import write_zip

    path = root / ZIP_NAME
    members = kaggle_members(root)
    data = bytearray(path.read_bytes())
    entries = central_entries(path)
    stored = zip_image(members, "train", 0)
    short = stored.rsplit("/", 1)[1]
    if kind == "member swapped":  # its entry points at another class's member: offset, sizes, CRC
        other = zip_image(members, "train", 0, SYNSETS[1])
        (a, a_extra), (b, b_extra) = entries[stored], entries[other]
        data[a + 16:a + 20] = data[b + 16:b + 20]
        data[a_extra:a_extra + 24] = data[b_extra:b_extra + 24]
        path.write_bytes(bytes(data))
        return [ZIP_NAME, short, other.rsplit("/", 1)[1], "runs into"]
    if kind == "size lie":  # a Zip64 size 5,000 bytes too big: the next member's local header inside it
        at = entries[stored][1]
        usize, csize = struct.unpack_from("<2Q", data, at)
        struct.pack_into("<2Q", data, at, usize + 5000, csize + 5000)
        path.write_bytes(bytes(data))
        return [ZIP_NAME, short, "runs into"]
    if kind in ("CRC lie (stored)", "CRC lie (deflated)"):
        name = stored if kind.endswith("(stored)") else zip_image(members, "train", 8)
        at = entries[name][0] + 16
        struct.pack_into("<L", data, at, struct.unpack_from("<L", data, at)[0] ^ 1)
        path.write_bytes(bytes(data))
        return [ZIP_NAME, name, "CRC-32"]
    if kind == "corrupted payload (stored)":
        name = zip_image(members, "val", 0)
        local = struct.unpack_from("<Q", data, entries[name][1] + 16)[0]
        name_len, extra_len = struct.unpack_from("<2H", data, local + 26)
        data[local + 30 + name_len + extra_len + 200] ^= 0x55
        path.write_bytes(bytes(data))
        return [ZIP_NAME, name, "corrupt: CRC-32"]
    if kind == "truncated":
        cut(path)
        return [ZIP_NAME, "truncated"]
    if kind == "empty piece":
        write_zip(path, [m for m in members if not m[0].endswith(".JPEG")])
        return [ZIP_NAME, "holds no ILSVRC/Data/CLS-LOC/train/"]
    if kind == "missing piece":  # a class's folder gone from the zip
        write_zip(path, [m for m in members if f"/{SYNSETS[1]}/" not in m[0]])
        return [ZIP_NAME, "ILSVRC/Data/CLS-LOC/train", SYNSETS[1]]
    if kind == "name not UTF-8":  # flagged UTF-8, but a byte that is not
        marked = stored[:-6] + "~.JPEG"
        write_zip(path, [(marked if n == stored else n, d, m, dd) for n, d, m, dd in members])
        data = bytearray(path.read_bytes())
        entry = central_entries(path)[marked][0]
        local = struct.unpack_from("<Q", data, central_entries(path)[marked][1] + 16)[0]
        for flags_at in (entry + 8, local + 6):
            struct.pack_into("<H", data, flags_at, struct.unpack_from("<H", data, flags_at)[0] | 0x800)
        path.write_bytes(bytes(data).replace(marked.encode(), marked.encode().replace(b"~", b"\xff")))
        return [ZIP_NAME, stored[:-6] + "\\xff.JPEG", "not UTF-8"]
    if kind == "duplicate":
        write_zip(path, members + [m for m in members if m[0] == stored])
        return [ZIP_NAME, f"holds {short} twice"]
    raise AssertionError(kind)


_KAGGLE_MEMBERS = {}


def kaggle_members(root):
    """The members the sample's zip was written from (sample_members of the ILSVRC sample beside it)."""
    from imagenet_build.sources.kaggle_listing import ZIP_NAME

    key = hashlib.sha256((root / ZIP_NAME).read_bytes()).hexdigest()
    if key not in _KAGGLE_MEMBERS:
        import zipfile

        with zipfile.ZipFile(root / ZIP_NAME) as z:
            _KAGGLE_MEMBERS[key] = [(i.filename, z.read(i), i.compress_type, bool(i.flag_bits & 8))
                                    for i in z.infolist()]
    return _KAGGLE_MEMBERS[key]


# ------------------------------------------------------------------ Hugging Face: parquet files


def parquet_damage(kind, root):
    import pyarrow
    import pyarrow.parquet as pq

    data = root / "data"
    path = data / "train-00000-of-00003.parquet"
    table = pq.read_table(path)
    image = table.column("image").combine_chunks()
    paths, labels = image.field("path").to_pylist(), table.column("label").to_pylist()

    def write(target, paths=paths, labels=labels, binary_paths=None, rows=None):
        names = binary_paths if binary_paths is not None else pyarrow.array(paths, pyarrow.string())
        images = pyarrow.StructArray.from_arrays([image.field("bytes"), names], ["bytes", "path"])
        out = pyarrow.table({"image": images, "label": pyarrow.array(labels, pyarrow.int64())})
        pq.write_table(out if rows is None else out.slice(0, rows), target, row_group_size=4)

    if kind == "truncated":
        cut(path)
        return [path.name, "not a readable parquet file"]
    if kind == "empty piece":
        write(data / "train-00001-of-00003.parquet", rows=0)
        return ["train-00001-of-00003.parquet", "holds no train images"]
    if kind == "missing piece":
        (data / "train-00002-of-00003.parquet").unlink()
        return ["train-00002-of-00003.parquet", "missing"]
    if kind == "name not UTF-8":
        raw = [p.encode() for p in paths]
        raw[0] = raw[0][:-6] + b"\xff.JPEG"
        write(path, binary_paths=pyarrow.array(raw, pyarrow.binary()).view(pyarrow.string()))
        return [path.name, paths[0][:-6] + "\\xff.JPEG", "not UTF-8"]
    if kind == "label out of range":
        write(path, labels=[-1] + labels[1:])
        return [path.name, paths[0], "row 0", "label -1 is outside"]
    if kind == "label null":
        write(path, labels=[None] + labels[1:])
        return [path.name, paths[0], "row 0", "label is null"]
    if kind == "path null":
        write(path, paths=[None] + paths[1:])
        return [f"{path.name}:row 0", "image.path is null"]
    if kind == "label disagreeing":
        write(path, labels=[1 - labels[0]] + labels[1:])  # the sample's classes are labels 0 and 1
        return [path.name, paths[0], "but its label"]
    if kind == "duplicate":  # the row in a second file too
        other = data / "train-00001-of-00003.parquet"
        both = pyarrow.concat_tables([pq.read_table(other), table.slice(0, 1)])
        pq.write_table(both, other, row_group_size=4)
        original = paths[0].rsplit("_", 1)[0] + ".JPEG"
        return [path.name, other.name, f"holds {original}"]
    raise AssertionError(kind)


# ------------------------------------------------------------------ the evaluation sets: a .tar, a .tar.gz, a zip

EVAL_ARCHIVES = {"imagenet-a": "imagenet-a.tar", "imagenet-r": "imagenet-r.tar",
                 "imagenet-v2": "imagenetv2-matched-frequency.tar.gz", "imagenet-sketch": "ImageNet-Sketch.zip"}
NO_CLASS = {"imagenet-v2": "1000", "imagenet-sketch": "n09999999", "imagenet-a": SYNSETS[0],
            "imagenet-r": SYNSETS[0]}  # a class folder the set does not have (tench is in neither A nor R)


def eval_members(archive):
    if archive.suffix == ".zip":
        import zipfile

        with zipfile.ZipFile(archive) as z:
            return [(i.filename, z.read(i), i.compress_type, False) for i in z.infolist()]
    data = archive.read_bytes()
    return tar_members(gzip.decompress(data) if archive.name.endswith(".gz") else data)


def eval_write(archive, members):
    from imagenet_build.sources.zips import DEFLATED, write_zip

    if archive.suffix == ".zip":
        write_zip(archive, [m if len(m) == 4 else (*m, DEFLATED, False) for m in members])
    else:
        archive.write_bytes(tar_bytes([m[:2] for m in members], gz=archive.name.endswith(".gz")))


def eval_damage(kind, root):
    """Damage an evaluation set's archive; the zip's own kinds are sketch_damage's."""
    copy_kind = next(name for name, archive in EVAL_ARCHIVES.items() if (root / archive).exists())
    archive = root / EVAL_ARCHIVES[copy_kind]
    members = eval_members(archive)
    images = [m for m in members if m[0].lower().endswith((".jpg", ".jpeg"))]
    first, folders = images[0][0], sorted({m[0].split("/")[1] for m in images})
    if kind == "truncated":
        cut(archive)
        return [archive.name, "truncated"]
    if kind == "empty piece":  # what it ships beside its images, and no image
        eval_write(archive, [m for m in members if m not in images])
        return [archive.name, "holds no validation images"]
    if kind == "missing piece":  # a class folder of its fixed list gone
        eval_write(archive, [m for m in members if m[0].split("/")[1:2] != [folders[1]]])
        return [archive.name, "no class folder for 1 of", folders[1]]
    if kind == "name not UTF-8":
        if archive.suffix == ".zip":
            return sketch_damage(kind, root, archive, members)
        eval_write(archive, renamed_first(members, ".jp"))
        return [archive.name, not_utf8(first).replace("\udcff", "\\udcff"), "not UTF-8"]
    if kind == "label out of range":  # an image in a class folder the set has not
        top, _, name = first.split("/")
        moved = f"{top}/{NO_CLASS[copy_kind]}/{name}"
        eval_write(archive, [(moved, *m[1:]) if m[0] == first else m for m in members])
        return [archive.name, moved, "a foreign file", "not one of"]
    if kind == "duplicate":
        eval_write(archive, members + [images[0]])
        return [archive.name, f"holds {first.split('/', 1)[1]} twice"]
    return sketch_damage(kind, root, archive, members)


def sketch_damage(kind, root, path, members):
    """The zip's own damage, as kaggle_damage does it to Kaggle's."""
    data = bytearray(path.read_bytes())
    entries = central_entries(path)
    stored = [n for n, _, method, _ in members if method == 0]
    if kind == "member swapped":  # its entry points at another member: offset, sizes, CRC
        (a, a_extra), (b, b_extra) = entries[stored[0]], entries[stored[1]]
        data[a + 16:a + 20] = data[b + 16:b + 20]
        data[a_extra:a_extra + 24] = data[b_extra:b_extra + 24]
        path.write_bytes(bytes(data))
        return [path.name, stored[0], stored[1], "runs into"]
    if kind == "size lie":
        at = entries[stored[0]][1]
        usize, csize = struct.unpack_from("<2Q", data, at)
        struct.pack_into("<2Q", data, at, usize + 5000, csize + 5000)
        path.write_bytes(bytes(data))
        return [path.name, stored[0], "runs into"]
    if kind in ("CRC lie (stored)", "CRC lie (deflated)"):
        name = stored[0] if kind.endswith("(stored)") else next(n for n, _, m, _ in members if m == 8)
        at = entries[name][0] + 16
        struct.pack_into("<L", data, at, struct.unpack_from("<L", data, at)[0] ^ 1)
        path.write_bytes(bytes(data))
        return [path.name, name, "CRC-32"]
    if kind == "corrupted payload (stored)":
        local = struct.unpack_from("<Q", data, entries[stored[0]][1] + 16)[0]
        name_len, extra_len = struct.unpack_from("<2H", data, local + 26)
        data[local + 30 + name_len + extra_len + 200] ^= 0x55
        path.write_bytes(bytes(data))
        return [path.name, stored[0], "corrupt: CRC-32"]
    if kind == "name not UTF-8":  # flagged UTF-8, but a byte that is not
        marked = stored[0][:-6] + "~.JPEG"
        eval_write(path, [(marked if n == stored[0] else n, *rest) for n, *rest in members])
        data = bytearray(path.read_bytes())
        entry, extra = central_entries(path)[marked]
        local = struct.unpack_from("<Q", data, extra + 16)[0]
        for flags_at in (entry + 8, local + 6):
            struct.pack_into("<H", data, flags_at, struct.unpack_from("<H", data, flags_at)[0] | 0x800)
        path.write_bytes(bytes(data).replace(marked.encode(), marked.encode().replace(b"~", b"\xff")))
        return [path.name, stored[0][:-6] + "\\xff.JPEG", "not UTF-8"]
    raise AssertionError(kind)


# ------------------------------------------------------------------ the table

TAR = "a tar member's data is where its header says: nothing to point elsewhere (read_member checks the header)"
NO_CRC = "a tar carries no checksum of a member's data"
FOLDER_LABEL = "the class folder (or archive) is the label, as in slim: nothing else in the copy carries one"
ONE_ARCHIVE = "one archive per split: without it that split is not built, as with the ILSVRC tarballs"
NO_PATH = "member names are the tar's own: none can be null"
NAME_LABEL = "the label is the name's synset suffix: it can disagree (below), not be out of range or null"
WDS_PATH = "a sample's name is its key: none can be null"
TAR_SIZE = "a size lie in a tar header breaks the listing at the next header: shown for the ILSVRC tarballs"

# copy kind -> {damage kind: how to apply it (returns the error's fragments), or why it does not apply}
DAMAGES = {
    "ilsvrc": dict.fromkeys(KINDS, ilsvrc_damage) | {
        "member swapped": TAR, "CRC lie (stored)": NO_CRC, "CRC lie (deflated)": NO_CRC,
        "corrupted payload (stored)": NO_CRC, "label out of range": FOLDER_LABEL, "label null": FOLDER_LABEL,
        "path null": NO_PATH, "label disagreeing": FOLDER_LABEL},
    "kaggle": dict.fromkeys(KINDS, kaggle_damage) | {
        "label out of range": FOLDER_LABEL, "label null": FOLDER_LABEL, "path null": NO_PATH,
        "label disagreeing": FOLDER_LABEL},
    "wds": dict.fromkeys(KINDS, wds_damage) | {
        "member swapped": TAR, "size lie": TAR_SIZE, "CRC lie (stored)": NO_CRC, "CRC lie (deflated)": NO_CRC,
        "corrupted payload (stored)": NO_CRC, "path null": WDS_PATH},
    "hf": dict.fromkeys(KINDS, hf_damage) | {
        "member swapped": TAR, "size lie": TAR_SIZE, "CRC lie (stored)": NO_CRC, "CRC lie (deflated)": NO_CRC,
        "corrupted payload (stored)": NO_CRC, "label out of range": NAME_LABEL, "label null": NAME_LABEL,
        "path null": NO_PATH},
    "hf-parquet": dict.fromkeys(KINDS, parquet_damage) | {
        "member swapped": "a row holds its image: nothing points elsewhere",
        "size lie": "a row holds its image: no size to lie",
        "CRC lie (stored)": "parquet's own page checksums are pyarrow's to check",
        "CRC lie (deflated)": "parquet's own page checksums are pyarrow's to check",
        "corrupted payload (stored)": "parquet's own page checksums are pyarrow's to check"},
    "blurred": dict.fromkeys(KINDS, blurred_damage) | {
        "member swapped": TAR, "size lie": TAR_SIZE, "CRC lie (stored)": NO_CRC, "CRC lie (deflated)": NO_CRC,
        "corrupted payload (stored)": NO_CRC, "label out of range": FOLDER_LABEL, "label null": FOLDER_LABEL,
        "path null": NO_PATH},
    **{copy_kind: dict.fromkeys(KINDS, eval_damage) | {
        "member swapped": TAR, "size lie": TAR_SIZE, "CRC lie (stored)": NO_CRC, "CRC lie (deflated)": NO_CRC,
        "corrupted payload (stored)": NO_CRC, "label null": FOLDER_LABEL, "label disagreeing": FOLDER_LABEL,
        "path null": NO_PATH} for copy_kind in ("imagenet-a", "imagenet-r", "imagenet-v2")},
    "imagenet-sketch": dict.fromkeys(KINDS, eval_damage) | {
        "label null": FOLDER_LABEL, "label disagreeing": FOLDER_LABEL, "path null": NO_PATH},
}

CASES = [(copy_kind, kind) for copy_kind, kinds in DAMAGES.items() for kind, how in kinds.items() if callable(how)]


def test_every_registered_copy_kind_declares_every_damage():
    """A copy registered for `sample --layout` is in the table, each damage applied or said not to apply."""
    assert sorted(DAMAGES) == sorted(sample_kinds())
    for copy_kind, kinds in DAMAGES.items():
        assert sorted(kinds) == sorted(KINDS), copy_kind
        assert all(callable(how) or (isinstance(how, str) and how) for how in kinds.values()), copy_kind


@pytest.fixture(scope="module")
def clean(small_copy, tmp_path_factory):
    """copy kind -> {path: sha256} of the clean build of its sample: all a failed run may leave under a final name."""
    built = {}

    def get(copy_kind):
        if copy_kind not in built:
            out = tmp_path_factory.mktemp(f"{copy_kind}-clean") / "out"
            result = run_cli(*convert_args(small_copy(copy_kind), out))
            assert result.exit_code == 0, result.output
            built[copy_kind] = shard_files(out)
        return built[copy_kind]

    return get


def convert_args(copy, out):
    return ["convert", "--from", copy, "--output-dir", out, "--labels-file", copy / "labels.txt",
            "--validation-labels-file", copy / "validation_labels.txt", "--bounding-box-file", copy / "bboxes.csv",
            *SHARDS]


@pytest.mark.parametrize("copy_kind,kind", CASES, ids=[f"{copy_kind}-{kind}" for copy_kind, kind in CASES])
def test_a_damaged_copy_is_one_error_line_and_nothing_wrong_is_built(small_copy, clean, tmp_path, copy_kind, kind):
    copy = tmp_path / "copy"
    shutil.copytree(small_copy(copy_kind), copy)
    fragments = DAMAGES[copy_kind][kind](kind, copy)
    before = tree_digest(copy)
    out = tmp_path / "out"
    result = run_cli(*convert_args(copy, out))
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    assert tree_digest(copy) == before  # the inputs are unchanged
    left = tree_digest(out) if out.exists() else {}
    assert not [p for p in left if ".imagenet-build-spool-" in p or ".tmp" in p], left
    manifest = left.pop("manifest.json", None)
    if manifest is not None:  # a failure while writing shards: the manifest says it is not complete
        assert json.loads((out / "manifest.json").read_text())["complete"] is False
    if left:  # whatever is under a final name is what a clean build writes
        expected = clean(copy_kind)
        assert all(expected.get(name) == digest for name, digest in left.items()), left
