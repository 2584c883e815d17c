"""Where the boxes' XML is read from (catalog/boxes.py): a folder of `<synset>/*.xml`, the box archive as a
stream (gzip'd or not, checked to its end), a folder holding the archive, an object store's prefix; each
unreadable source one line naming it."""

import gzip
import io
import tarfile

import pytest
from test_boxes import SYNSETS, annotation

from imagenet_build.catalog.boxes import BBOX_ARCHIVE, box_source, boxes_to_csv_lines, iter_xml_files
from imagenet_build.infra.errors import InputError

XML = {f"{SYNSETS[0]}/{SYNSETS[0]}_{k}.xml": annotation(100, 100, [(1, 1, 50 + k, 50)]) for k in range(3)}
EXPECTED = [(SYNSETS[0], f"{SYNSETS[0]}_{k}", XML[f"{SYNSETS[0]}/{SYNSETS[0]}_{k}.xml"]) for k in range(3)]


def tar_bytes(members=XML, top=""):
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(top + name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        notes = tarfile.TarInfo(top + "README")  # not <synset>/<stem>.xml: passed over
        tar.addfile(notes, io.BytesIO(b""))
    return out.getvalue()


def test_the_archive_gives_each_xml_by_its_synset_and_stem_gzipped_or_not(tmp_path):
    archive = tmp_path / BBOX_ARCHIVE
    archive.write_bytes(gzip.compress(tar_bytes(top="val/"), mtime=0))
    assert list(iter_xml_files(archive)) == EXPECTED  # a deeper path: its last two parts
    plain = tmp_path / "boxes.tar"
    plain.write_bytes(tar_bytes())
    assert list(iter_xml_files(plain)) == EXPECTED


def test_a_folder_of_xml_gives_the_same(tmp_path):
    for name, data in XML.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_bytes(data)
    assert list(iter_xml_files(tmp_path)) == EXPECTED


@pytest.mark.parametrize("cut", ["headers stop early", "end marker cut", "junk after the end"])
def test_a_tar_cut_short_or_with_junk_after_its_end_is_refused(tmp_path, cut):
    data = tar_bytes()
    end = (len(data.rstrip(b"\0")) + 511) // 512 * 512  # the last member's end: the end-of-archive blocks follow
    damaged = {"headers stop early": data[:end] + b"\0" * 512,  # one zero block: tarfile's stream mode stops
               "end marker cut": data[:end + 256],
               "junk after the end": data[:end + 1024] + b"junk"}[cut]
    archive = tmp_path / BBOX_ARCHIVE
    archive.write_bytes(gzip.compress(damaged, mtime=0))
    with pytest.raises(InputError) as refused:
        list(iter_xml_files(archive))
    assert refused.value.path == str(archive)
    assert refused.value.problem == ("truncated: the tar has no end-of-archive marker after its last member (an "
                                     "interrupted download?)")


def test_what_is_no_archive_or_is_not_there_is_one_line_naming_it(tmp_path):
    junk = tmp_path / "boxes.tar.gz"
    junk.write_bytes(b"not an archive at all, nor gzip" * 40)
    with pytest.raises(InputError) as refused:
        list(iter_xml_files(junk))
    assert refused.value.path == str(junk)
    assert refused.value.problem.startswith("not a readable .tar.gz of XML files (")
    with pytest.raises(InputError) as missing:
        list(iter_xml_files(tmp_path / "nowhere"))
    assert (missing.value.path, missing.value.problem) == (str(tmp_path / "nowhere"), "neither a folder nor a file")


def test_a_folder_holding_the_archive_is_read_as_the_archive_unless_it_holds_xml(tmp_path):
    (tmp_path / BBOX_ARCHIVE).write_bytes(gzip.compress(tar_bytes(), mtime=0))
    assert box_source(tmp_path) == str(tmp_path / BBOX_ARCHIVE)
    assert box_source(tmp_path / BBOX_ARCHIVE) == str(tmp_path / BBOX_ARCHIVE)
    (tmp_path / SYNSETS[1]).mkdir()
    (tmp_path / SYNSETS[1] / "x.xml").write_bytes(XML[f"{SYNSETS[0]}/{SYNSETS[0]}_0.xml"])
    assert box_source(tmp_path) == str(tmp_path)  # its own XML folders first
    empty = tmp_path / "empty"
    empty.mkdir()
    assert box_source(empty) == str(empty)


def test_finding_no_xml_says_what_was_looked_for_in_a_folder_and_in_an_archive(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError) as in_folder:
        boxes_to_csv_lines(empty, SYNSETS)
    looked = f"<synset>/*.xml files and {BBOX_ARCHIVE}"
    assert in_folder.value.problem == f"no bounding-box XML found: looked for {looked} in it"
    archive = tmp_path / "other.tar.gz"
    archive.write_bytes(gzip.compress(tar_bytes({}), mtime=0))
    with pytest.raises(InputError) as in_archive:
        boxes_to_csv_lines(archive, SYNSETS)
    assert in_archive.value.problem == "no bounding-box XML found: looked for <synset>/*.xml members in it"


def test_an_object_stores_prefix_holding_the_archive_is_read_as_the_archive(bucket):
    import fsspec

    fs, root = fsspec.core.url_to_fs(bucket)
    fs.pipe(f"{root}/boxes/{BBOX_ARCHIVE}", gzip.compress(tar_bytes(), mtime=0))
    fs.pipe(f"{root}/other/notes.txt", b"no archive here")
    assert box_source(f"{bucket}/boxes") == f"{bucket}/boxes/{BBOX_ARCHIVE}"
    assert box_source(f"{bucket}/other") == f"{bucket}/other"
    assert list(iter_xml_files(box_source(f"{bucket}/boxes"))) == EXPECTED
    with pytest.raises(InputError) as none:
        boxes_to_csv_lines(f"{bucket}/other", SYNSETS)
    assert (none.value.path, none.value.problem) == (
        f"{bucket}/other", f"a folder on an object store holding no {BBOX_ARCHIVE}: XML folders are read from local "
                           "folders; give the archive, or copy the folders here")


def test_a_tar_ending_with_its_two_zero_blocks_alone_is_whole(tmp_path):
    data = tar_bytes()
    end = (len(data.rstrip(b"\0")) + 511) // 512 * 512
    archive = tmp_path / BBOX_ARCHIVE
    archive.write_bytes(gzip.compress(data[:end + 1024], mtime=0))  # no padding to a whole record after them
    assert list(iter_xml_files(archive)) == EXPECTED
    archive.write_bytes(gzip.compress(data[:end + 1024] + b"XX", mtime=0))
    with pytest.raises(InputError, match="truncated: the tar has no end-of-archive marker"):
        list(iter_xml_files(archive))


def test_the_gzip_stream_is_checked_to_its_end_after_the_tar(tmp_path):
    """The CRC-32 in the gzip trailer is checked once the stream is read to its end: after the tar's last block."""
    # 2 MB of zeros after the tar's end, stored: the stream is read in pieces, its end only when drained
    packed = bytearray(gzip.compress(tar_bytes() + bytes(2_000_000), compresslevel=0, mtime=0))
    packed[-8] ^= 0xFF  # the trailer's CRC-32 no longer that of the data
    archive = tmp_path / BBOX_ARCHIVE
    archive.write_bytes(bytes(packed))
    with pytest.raises(InputError) as refused:
        list(iter_xml_files(archive))
    assert refused.value.path == str(archive)
    assert refused.value.problem.startswith("not a valid gzip file (")  # zlib's or ISA-L's words for the CRC
