"""What checking that the bytes read are the member listed costs, per image, on ~100 KB JPEGs.

A zip of stored members (Kaggle's layout, written by the sample's write_zip) and a flat tar (the
ILSVRC validation archive's shape) of the same N JPEGs, read member by member from the page cache
as a worker reads them: the bytes alone (a pread of the range: what was done before), and with the
checks (zip: member_bytes, its local header compared with the directory and the CRC-32 of the
bytes; tar: read_member, the 512-byte header before the data read in the same pread and its CRC
compared). CRC-32 alone (deflate_codec().crc32: ISA-L where installed) is timed over the same bytes.
Medians of --repeats passes.
Usage: python benchmarks/bench_member_checks.py [--images 2000] [--repeats 7]
"""

import argparse
import io
import os
import random
import statistics
import tarfile
import tempfile
import time
from pathlib import Path


def jpegs(count):
    """`count` distinct noisy JPEGs of about 100 KB (their bytes as random as a photograph's)."""
    from PIL import Image

    rng = random.Random(0)
    pictures = []
    for _ in range(min(count, 32)):
        noise = Image.frombytes("RGB", (480, 360), rng.randbytes(480 * 360 * 3))
        out = io.BytesIO()
        noise.save(out, "JPEG", quality=75)
        pictures.append(out.getvalue())
    return [pictures[i % len(pictures)][:-2] + i.to_bytes(4, "big") + b"\xff\xd9" for i in range(count)]


def timed(passes, work):
    """Median seconds of `work()` over `passes` runs."""
    times = []
    for _ in range(passes):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def write_copies(work, images):
    """A stored zip and a flat tar of the images; their listings (as the scans make them)."""
    import zipfile

    from imagenet_build.sources.tars import list_members
    from imagenet_build.sources.zips import STORED, pack_member_info, write_zip

    names = [f"ILSVRC/Data/CLS-LOC/val/ILSVRC2012_val_{n:08d}.JPEG" for n in range(1, len(images) + 1)]
    zip_path, tar_path = Path(work) / "stored.zip", Path(work) / "flat.tar"
    write_zip(zip_path, [(name, data, STORED, False) for name, data in zip(names, images)])
    with tarfile.open(tar_path, "w", format=tarfile.GNU_FORMAT) as tar:
        for name, data in zip(names, images):
            info = tarfile.TarInfo(name.rsplit("/", 1)[1])
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    with zipfile.ZipFile(zip_path) as z:
        zipped = [(i.filename, i.header_offset, i.compress_size, pack_member_info(STORED, i.file_size, i.CRC))
                  for i in z.infolist()]
    with open(tar_path, "rb") as f:
        tarred = list_members(f, tar_path.stat().st_size, str(tar_path))
    return zip_path, zipped, tar_path, tarred


def passes(zip_fd, zipped, tar_fd, tarred, images):
    """{name: one pass over every member}, without and with the checks."""
    from imagenet_build.infra.deflate import deflate_codec
    from imagenet_build.sources.tars import read_member, read_range
    from imagenet_build.sources.zips import HEAD_READ, member_bytes

    crc32 = deflate_codec().crc32

    def zip_bytes_only():
        for _, offset, size, _ in zipped:  # the local header, then the data's range (before: no check)
            head = read_range(zip_fd, offset, HEAD_READ)
            start = 30 + int.from_bytes(head[26:28], "little") + int.from_bytes(head[28:30], "little")
            data = head[start:start + size] if start + size <= len(head) else read_range(zip_fd, offset + start, size)
            assert len(data) == size

    def zip_checked():
        for name, offset, size, member_info in zipped:
            member_bytes(zip_fd, offset, size, member_info, name, name, read_range(zip_fd, offset, HEAD_READ))

    def tar_bytes_only():
        for _, offset, size, _, _ in tarred:
            assert len(read_range(tar_fd, offset, size)) == size

    def tar_checked():
        for name, offset, size, _, crc in tarred:
            read_member(tar_fd, offset, size, crc, name)

    def crc_only():
        for data in images:
            crc32(data)

    return {"zip: bytes only": zip_bytes_only, "zip: checked": zip_checked, "tar: bytes only": tar_bytes_only,
            "tar: checked": tar_checked, "CRC-32 alone": crc_only}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    from imagenet_build.infra.deflate import deflate_codec

    images = jpegs(args.images)
    total = sum(map(len, images))
    with tempfile.TemporaryDirectory() as work:
        zip_path, zipped, tar_path, tarred = write_copies(work, images)
        zip_fd, tar_fd = os.open(zip_path, os.O_RDONLY), os.open(tar_path, os.O_RDONLY)
        work_of = passes(zip_fd, zipped, tar_fd, tarred, images)
        for one in work_of.values():
            one()  # the page cache warm, every check passing
        figures = {name: timed(args.repeats, one) for name, one in work_of.items()}
        os.close(zip_fd)
        os.close(tar_fd)
    print(f"{len(images)} JPEGs, {total / len(images) / 1e3:.0f} KB each on average, {total / 1e6:.0f} MB; "
          f"CRC-32 by {deflate_codec().crc32.__module__}; page cache warm; medians of {args.repeats}")
    for name, seconds in figures.items():
        print(f"  {name:16s} {seconds * 1e3:7.1f} ms  {seconds / len(images) * 1e6:6.1f} us/image  "
              f"{total / seconds / 1e9:5.2f} GB/s")
    for kind in ("zip", "tar"):
        more = figures[f"{kind}: checked"] - figures[f"{kind}: bytes only"]
        print(f"  {kind} checks: +{more / len(images) * 1e6:.1f} us/image, "
              f"+{100 * more / figures[f'{kind}: bytes only']:.0f}% of the read from the page cache")


if __name__ == "__main__":
    main()
