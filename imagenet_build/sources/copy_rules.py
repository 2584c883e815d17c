"""The rules every copy's listing keeps, and the MemberReader its images are read with.

A copy (copies.py) lists each split on the driver: its images in slim's order — class by
class in labels-file order, then by file name — into a SplitInput: names, labels and, for
an image inside an archive, its byte range there. The rules of that listing live here, once:
classes against the labels file, a class with no images, an image twice, a piece of a copy
with none, flat validation names labelled by number. A MemberReader (in a worker) reads one
shard's images by their number in its ShardSpec, and names each input's state (what a rerun
compares to decide that an input changed). The plan, the writers and resume see only these
two; none of them knows where the bytes come from.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Callable

from imagenet_build.infra.errors import InputError, PathLike, input_errors
from imagenet_build.model import SplitInput, Where, file_name, utf8_name

if TYPE_CHECKING:
    from imagenet_build.catalog.classes import Catalog
    from imagenet_build.model import ImageEntry, ShardSpec


READ_AHEAD = 8  # input images announced to the kernel ahead of their turn, by every reader


def will_need(fd: int, offset: int, length: int) -> None:
    """Tell the kernel bytes [offset, offset + length) of `fd` will be read soon (length 0: to the end)."""
    if hasattr(os, "posix_fadvise"):
        os.posix_fadvise(fd, offset, length, os.POSIX_FADV_WILLNEED)


def read_whole(fd: int, size: int) -> bytes:
    """Every byte of an open file from where it stands to its end, `size` being what fstat said is left: one
    read where it still holds that many (os.read, no file object around it), more where it grew or shrank."""
    data = os.read(fd, size + 1)
    if len(data) == size:
        return data
    chunks = [data]
    while chunks[-1]:
        chunks.append(os.read(fd, max(size, 1 << 16)))
    return b"".join(chunks)


IMAGE_SUFFIX = ".JPEG"
VALIDATION_NAME = re.compile(r"^ILSVRC2012_val_(\d{8})\.JPEG$")
SHOWN = 20  # how many ignored / left-out names a report lists
ANY_IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")  # --classes-from-folders: any case


def validation_number(relpath: str) -> int | None:
    """The number of a listed ILSVRC2012 validation image, or None for another name. Every copy lists a validation
    image under its original name, ILSVRC2012_val_<8 digits>.JPEG, whatever its archive calls it (a synset
    suffix cut, `.jpg` made `.JPEG`): slim's image/filename, and what --subset and --real-labels match."""
    match = VALIDATION_NAME.match(file_name(relpath))
    return int(match.group(1)) if match else None


def labelled_synset(number: int, validation_labels: list[str]) -> str | None:
    """The synset the validation labels file gives validation image `number` (its line `number`), or None
    when the file has fewer lines."""
    return validation_labels[number - 1] if 1 <= number <= len(validation_labels) else None


def no_label(number: int, validation_labels: list[str], validation_labels_file: PathLike) -> str:
    """The problem of a validation image past the end of the validation labels file."""
    return f"no label: {validation_labels_file} has {len(validation_labels)} lines, this is image {number}"


def scan_folder(root: PathLike) -> tuple[list[str], list[str]]:
    """(folders, files) directly under root, each sorted by name."""
    folders: list[str] = []
    files: list[str] = []
    with input_errors(root, expected="a folder", missing="folder not found"), os.scandir(root) as it:
        for entry in it:
            utf8_name(entry.name, str(root))
            if entry.is_dir():
                folders.append(entry.name)
            elif entry.is_file():
                files.append(entry.name)
            else:  # reading a FIFO waits forever, /dev/zero never ends: refused before any read
                raise InputError(os.path.join(root, entry.name),
                                 "not a regular file (a FIFO, socket, device or link to nothing)")
    return sorted(folders), sorted(files)


def is_image_name(name: str, any_image: bool = False) -> bool:
    if name.startswith("."):
        return False
    return name.lower().endswith(ANY_IMAGE_SUFFIXES) if any_image else name.endswith(IMAGE_SUFFIX)


def match_classes(
    result: SplitInput, root: PathLike, present: Iterable[str], catalog: Catalog, on_error: str, kind: str
) -> None:
    """Check the classes found against the labels file: unknown ones and missing ones."""
    unknown = [name for name in present if name not in catalog.label_of]
    if unknown:
        if on_error == "fail":
            raise InputError(
                f"{root}/{unknown[0]}",
                f"{kind} not in the labels file {catalog.labels_file} ({len(unknown)} such); "
                "pass the right --labels-file, or --on-error skip to leave them out",
            )
        result.left_out.extend((name + "/", f"{kind} not in the labels file") for name in unknown)
    missing = [synset for synset in catalog.synsets if synset not in present]
    if missing and len(missing) < len(catalog.synsets) and on_error == "fail":  # none at all: said later
        raise InputError(
            root,
            f"no {kind} for {len(missing)} synset(s) of the labels file ({', '.join(missing[:3])}"
            f"{' ...' if len(missing) > 3 else ''}); pass a --labels-file with only the classes you have, "
            "or --on-error skip to build without them",
        )
    result.empty_classes.extend(missing)


def add_class(
    result: SplitInput,
    synset: str,
    label: int,
    names: Iterable[tuple[str, Where]],
    on_error: str,
    kind: str,
    any_image: bool = False,
    place: Callable[[Where], str] | None = None,
    folder: str | None = None,
) -> None:
    """Add one class's images (names sorted, with an optional byte range); others are ignored.

    A class with no images at all would silently train without that class: an error under
    --on-error fail, left out and listed under skip. An image name twice: see once_each;
    `place` names the file an image lies in (default: the class folder or archive), `folder` the
    class folder as messages name it (default: the split's root, then the synset).
    """
    found = False
    folder = folder or f"{result.root}/{synset}{'.tar' if kind == 'class archive' else ''}"
    images = []
    for name, where in sorted(names, key=lambda item: item[0]):
        if is_image_name(name, any_image):
            images.append((name, where))
        else:
            result.ignored.append(f"{synset}/{name}")
    for name, where in once_each(images, place or lies_in(folder), result, on_error):
        result.add(f"{synset}/{name}", label, where)
        found = True
    if not found:
        wanted = "images (*.jpg, *.jpeg, *.png)" if any_image else f"*{IMAGE_SUFFIX} images"
        problem = f"{kind} holds no {wanted}: that class would have no {result.split} records"
        if on_error == "fail":
            raise InputError(folder, problem + "; add its images, or --on-error skip to build without it")
        result.left_out.append((f"{synset}/", problem))


def lies_in(path: str) -> Callable[[Where], str]:
    """A `place` for once_each: every image lies in `path`."""
    return lambda where: path


def once_each(
    items: Sequence[tuple[str, Where]], place: Callable[[Where], str], result: SplitInput, on_error: str
) -> Iterator[tuple[str, Where]]:
    """The items (sorted by name) with each name once: the one rule for an image twice in a copy.

    An archive holding a member twice, or an image in two archives or shards, would give its
    records twice: an error naming the file(s) holding it (`place` of its byte range);
    --on-error skip keeps the first and lists the other as left out.
    """
    previous: tuple[str, Where] | None = None
    for name, where in items:
        if previous is not None and name == previous[0]:
            first, second = place(previous[1]), place(where)
            problem = (f"holds {name} twice" if first == second else f"holds {name}, which {first} holds too")
            if on_error == "fail":
                raise InputError(second, problem + ": an image may be in a copy once (its records would be "
                                                   "doubled); --on-error skip keeps the first")
            result.left_out.append((f"{second}:{name}", f"a second {name} (the first kept): {second} {problem}"))
            continue
        previous = (name, where)
        yield name, where


def refuse_empty_pieces(pieces: Iterable[tuple[str, int]], split: str) -> None:
    """The one rule for a copy spread over several files (archives, shards, parquet files): a piece that
    holds no images is refused as a missing one is, whatever --on-error says.

    pieces: (path, how many images the scan found in it, counting those it left out). An
    empty archive (an interrupted download, a file emptied by a full disk) would build the
    split short of its images with exit 0.
    """
    for path, images in pieces:
        if not images:
            raise InputError(path, f"holds no {split} images: an empty piece of the copy (an interrupted "
                                   "download?) would build the split without its images; download it again")


def leave_out_disagreeing(result: SplitInput, problems: list[tuple[str, str]], what: str, on_error: str,
                          path_of: Callable[[str], str], noted: str = "") -> None:
    """Images whose name disagrees with their label, [(name, problem)]: with --on-error fail, one line naming
    the first (at path_of(name)); with skip they are left out, listed, and named in a note where `noted` says
    what disagrees with what."""
    if problems and on_error == "fail":
        name, problem = problems[0]
        raise InputError(path_of(name), f"{problem} ({len(problems)} such {what}); --on-error skip builds without them")
    result.left_out.extend(problems)
    if problems and noted:
        result.notes.append(f"{result.split}: {len(problems)} image(s) left out, {noted}: "
                            + ", ".join(name for name, _ in problems[:SHOWN]))


def require_images(result: SplitInput, root: PathLike, catalog: Catalog) -> None:
    if not result.relpaths:
        raise InputError(
            root, f"holds no <synset>/*{IMAGE_SUFFIX} images for the {catalog.num_classes} synsets of "
                  f"{catalog.labels_file}"
        )


def flat_validation(
    result: SplitInput,
    names: Iterable[tuple[str, Where]],
    catalog: Catalog,
    validation_labels: list[str],
    validation_labels_file: PathLike,
    on_error: str,
    place: Callable[[Where], str] | None = None,
) -> SplitInput:
    """Label flat `ILSVRC2012_val_%08d.JPEG` names [(name, byte range or None)] by line number.

    Ordered as slim sees them after moving them into synset folders, so a flat
    folder, a prepared one and the tarball give the same shards. A name twice: see
    once_each (`place` names the file an image lies in; default: the split's root).
    """
    by_label: dict[int, list[tuple[str, Where]]] = {}
    outside = 0
    for name, where in names:
        match = VALIDATION_NAME.match(name)
        if not match:
            result.ignored.append(name)
            continue
        number = int(match.group(1))
        synset = labelled_synset(number, validation_labels)
        if synset is None:
            problem = no_label(number, validation_labels, validation_labels_file)
            if on_error == "fail":
                raise InputError(f"{result.root}/{name}", problem + "; pass the right --validation-labels-file")
            result.left_out.append((name, problem))
            continue
        label = catalog.label_of.get(synset)
        if label is None:
            outside += 1
            continue
        by_label.setdefault(label, []).append((name, where))
    if outside:
        result.notes.append(
            f"{outside} validation image(s) left out: their synsets are not in {catalog.labels_file}"
        )
    for label, synset in enumerate(catalog.synsets, start=1):
        items = sorted(by_label.get(label, []), key=lambda item: item[0])
        if not items:
            result.empty_classes.append(synset)
        for name, where in once_each(items, place or lies_in(result.root), result, on_error):
            result.add(name, label, where)
    if not result.relpaths:
        raise InputError(result.root, f"holds no ILSVRC2012_val_*.JPEG images of the synsets in the labels file as "
                                      f"the validation labels file labels them ({outside} of other synsets); pass "
                                      "the --validation-labels-file that labels these images")
    return result


# ------------------------------------------------------------------ reading in a worker


class MemberReader:
    """Reads one shard's images (spec.entries) by number, in any order; a context manager.

    `identities` collects, as each input is read, what names its state (entry_identity);
    the shard's input state hashes them, and a rerun recomputes them without reading.
    """

    def __init__(self, spec: ShardSpec) -> None:
        self.spec = spec
        self.identities: list[str] = []
        self._hinted = 0  # entries [0, _hinted) announced to the kernel

    def __enter__(self) -> MemberReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        pass

    def read(self, number: int) -> tuple[bytes, str]:
        """(the bytes of entry `number`, the name to show in errors); InputError when unreadable."""
        raise NotImplementedError

    def read_ahead(self, number: int) -> None:
        """Announce the entries up to READ_AHEAD past `number`, each once (read() calls it first): with
        a cold cache the disk then has several reads in flight instead of one at a time."""
        entries = self.spec.entries
        while self._hinted < min(number + 1 + READ_AHEAD, len(entries)):
            self.announce(self._hinted, entries[self._hinted])
            self._hinted += 1

    def announce(self, number: int, entry: ImageEntry) -> None:
        """Tell the kernel entry `number` is read soon (will_need); a problem is left to read() to report."""

    @staticmethod
    def identity(spec: ShardSpec, entry: ImageEntry) -> str:
        """What identifies the input now, without reading it."""
        raise NotImplementedError


def reader_for(spec: ShardSpec) -> MemberReader:
    """The shard's MemberReader: the class its split's listing named (SplitInput.reader)."""
    reader: MemberReader = spec.reader(spec)
    return reader


def input_identities(spec: ShardSpec) -> list[str]:
    """entry_identity of each of the shard's inputs as they are now, without reading them."""
    identify = spec.reader.identity
    return [identify(spec, entry) for entry in spec.entries]
