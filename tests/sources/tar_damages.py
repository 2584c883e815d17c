"""The damage convert --from must refuse in the copies read from tar archives (the ILSVRC2012 archives, WebDataset
shards, Hugging Face's .tar.gz files, the face-blurred archives): each kind applied to a small sample of the copy,
for the table of tests/sources/test_source_damage.py."""

import gzip
import io
import os
import tarfile
from pathlib import Path

SYNSETS = ("n01440764", "n01443537")  # the sample's two classes (the first two of the labels file)


# ------------------------------------------------------------------ tars


def tar_bytes(members, gz=False):
    """A GNU tar of [(name, bytes)] (a name may hold surrogates: bytes that are not UTF-8), gzipped if asked."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT, encoding="utf-8",
                      errors="surrogateescape") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(out.getvalue(), mtime=0) if gz else out.getvalue()


def tar_members(data):
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return [(m.name, tar.extractfile(m).read()) for m in tar if m.isfile()]


def rewrite(path, change):
    """The tar (or .tar.gz) at path rewritten with change([(name, bytes)]) -> [(name, bytes)]."""
    gz = path.name.endswith(".gz")
    path.write_bytes(tar_bytes(change(tar_members(path.read_bytes())), gz))


def rewrite_inner(path, synset, change):
    """A class tar of the ILSVRC train tar rewritten with change."""
    rewrite(path, lambda outer: [(n, tar_bytes(change(tar_members(d))) if n == f"{synset}.tar" else d)
                                 for n, d in outer])


def cut(path):
    """The file cut in the middle of its data."""
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2 + 100])


def not_utf8(name):
    """The name with its last character before the extension replaced by a byte that is not UTF-8."""
    stem, dot, ext = name.rpartition(".")
    return stem[:-1] + "\udcff" + dot + ext


def renamed_first(members, pattern=""):
    """The members with the first whose name holds `pattern` given a name that is not UTF-8."""
    first = next(i for i, (n, _) in enumerate(members) if pattern in n)
    return [(not_utf8(n) if i == first else n, d) for i, (n, d) in enumerate(members)]


# ------------------------------------------------------------------ ilsvrc: the three archives


def ilsvrc_damage(kind, root):
    """Damage the ILSVRC sample's archives (which --from reads from the folder); returns the error's fragments."""
    train, val = root / "ILSVRC2012_img_train.tar", root / "ILSVRC2012_img_val.tar"
    first_val = tar_members(val.read_bytes())[0][0]
    if kind == "truncated":
        cut(val)
        return [val.name, "truncated", "ILSVRC2012_val_"]
    if kind == "empty piece":
        rewrite_inner(train, SYNSETS[1], lambda members: [])
        return [train.name, f"{SYNSETS[1]}.tar", "holds no"]
    if kind == "missing piece":
        rewrite(train, lambda members: [m for m in members if m[0] != f"{SYNSETS[1]}.tar"])
        return [train.name, SYNSETS[1], "no class archive"]
    if kind == "name not UTF-8":  # in the flat validation folder, read once the archives are gone
        for archive in root.glob("ILSVRC2012_*.tar*"):
            archive.unlink()
        first = sorted((root / "validation").iterdir())[0]
        os.rename(first, os.fsencode(first)[:-6] + b"\xff.JPEG")
        return ["validation/ILSVRC2012_val_0000000\\udcff.JPEG", "not UTF-8"]
    if kind == "size lie":  # a member's header says 512 bytes more than it holds
        data = bytearray(train.read_bytes())
        at = data.index(f"{SYNSETS[0]}_1.JPEG".encode())  # its header, inside the class tar
        size = int(data[at + 124:at + 135], 8)
        data[at + 124:at + 136] = b"%011o\x00" % (size + 512)
        data[at + 148:at + 156] = b"%06o\x00 " % (sum(data[at:at + 148]) + 8 * 32 + sum(data[at + 156:at + 512]))
        train.write_bytes(bytes(data))
        return [train.name, f"{SYNSETS[0]}.tar", f"{SYNSETS[0]}_1.JPEG"]
    if kind == "duplicate":
        rewrite(val, lambda members: members + members[:1])
        return [val.name, f"holds {first_val} twice"]
    raise AssertionError(kind)


# ------------------------------------------------------------------ WebDataset shards


def wds_damage(kind, root):
    shards = sorted(root.glob("imagenet1k-train-*.tar"))
    shard = shards[0]
    members = tar_members(shard.read_bytes())
    key = members[0][0].split(".", 1)[0]
    if kind == "truncated":
        cut(shard)
        return [shard.name, "truncated"]
    if kind == "empty piece":
        shard.write_bytes(tar_bytes([]))
        return [shard.name, "holds no train images"]
    if kind == "missing piece":
        shards[1].unlink()
        return ["train shard number 1 is missing"]
    if kind == "name not UTF-8":
        rewrite(shard, lambda ms: renamed_first(ms, ".jpg"))
        return [shard.name, "\\udcff.jpg", "not UTF-8"]

    def with_cls(value):
        rewrite(shard, lambda ms: [(n, value if n == f"{key}.cls" else d) for n, d in ms])

    if kind == "label out of range":
        with_cls(b"5000")
        return [shard.name, key, ".cls 5000 is outside"]
    if kind == "label null":
        rewrite(shard, lambda ms: [(n, d) for n, d in ms if n != f"{key}.cls"])
        return [shard.name, key, "no .cls"]
    if kind == "label disagreeing":
        cls = int(dict(members)[f"{key}.cls"])
        with_cls(str(cls + 1).encode())
        return [shard.name, key, "is of"]
    if kind == "duplicate":  # the sample in a second shard too
        rewrite(shards[1], lambda ms: ms + [(n, d) for n, d in members if n.startswith(key + ".")])
        return [shards[0].name, shards[1].name, f"holds {key}.JPEG"]
    raise AssertionError(kind)


# ------------------------------------------------------------------ Hugging Face: .tar.gz archives


def hf_damage(kind, root):
    data = root / "data"
    archive = data / "train_images_0.tar.gz"
    first = tar_members(gzip.decompress(archive.read_bytes()))[0][0]
    if kind == "truncated":
        cut(archive)
        return [archive.name, "truncated"]
    if kind == "empty piece":
        (data / "train_images_4.tar.gz").write_bytes(tar_bytes([], gz=True))
        return ["train_images_4.tar.gz", "holds no train images"]
    if kind == "missing piece":
        (data / "train_images_4.tar.gz").unlink()
        return ["train_images_4.tar.gz missing"]
    if kind == "name not UTF-8":
        rewrite(archive, renamed_first)
        return [archive.name, not_utf8(first).replace("\udcff", "\\udcff"), "not UTF-8"]
    if kind == "label disagreeing":
        other = SYNSETS[1] if first.endswith(f"_{SYNSETS[0]}.JPEG") else SYNSETS[0]
        rewrite(archive, lambda ms: [(n.rsplit("_", 1)[0] + f"_{other}.JPEG" if n == first else n, d) for n, d in ms])
        return [archive.name, first.rsplit("_", 1)[0], f"labelled {other}"]
    if kind == "duplicate":  # the image in a second archive too
        member = tar_members(gzip.decompress(archive.read_bytes()))[0]
        rewrite(data / "train_images_3.tar.gz", lambda ms: ms + [member])
        original = first.rsplit("_", 1)[0] + ".JPEG"
        return ["train_images_0.tar.gz", "train_images_3.tar.gz", f"holds {original}"]
    raise AssertionError(kind)


# ------------------------------------------------------------------ the face-blurred archives


def blurred_damage(kind, root):
    archive = root / "train_blurred.tar.gz"
    members = tar_members(gzip.decompress(archive.read_bytes()))
    first = members[0][0]
    if kind == "truncated":
        cut(archive)
        return [archive.name, "truncated"]
    if kind == "empty piece":
        archive.write_bytes(tar_bytes([], gz=True))
        return [archive.name, "holds no train images"]
    if kind == "missing piece":  # a class folder gone from the archive
        rewrite(archive, lambda ms: [(n, d) for n, d in ms if f"/{SYNSETS[1]}/" not in n])
        return [archive.name, SYNSETS[1], "no class folder"]
    if kind == "name not UTF-8":
        rewrite(archive, renamed_first)
        return [archive.name, not_utf8(first).replace("\udcff", "\\udcff"), "not UTF-8"]
    if kind == "label disagreeing":  # in the other class's folder
        moved = first.replace(f"/{SYNSETS[0]}/", f"/{SYNSETS[1]}/")
        rewrite(archive, lambda ms: [(moved if n == first else n, d) for n, d in ms])
        return [archive.name, moved, "named for synset"]
    if kind == "duplicate":
        rewrite(archive, lambda ms: ms + ms[:1])
        return [archive.name, f"holds {Path(first).stem}.JPEG twice"]
    raise AssertionError(kind)
