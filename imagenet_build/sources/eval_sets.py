"""ImageNet's evaluation sets (ImageNetV2, ImageNet-A, ImageNet-R, ImageNet-Sketch): what their copies share.

Each set is one top folder of class folders, `<top>/<class>/<image>`, shipped as one archive (an
uncompressed .tar read in place, a .tar.gz decompressed once into a spool, or a .zip read in place)
or extracted; the class folder is a synset, or for ImageNetV2 a class number (the index in the
sorted list of the 1000 synsets). Each converts to one `validation` split in slim's order (class by
class in labels-file order, then by name), labelled from the labels file: 1000-class labels, never
renumbered to a set's own classes. `image/filename` is the image's path below the top folder
(`<class folder>/<file name>`: ImageNet-R's and -Sketch's file names repeat across classes).

What every set is held to, here once: a set with a fixed class list (the 1000 classes, or ImageNet-A's
and -R's 200) lacking one that the labels file names is a partial copy, refused; a file that is not
an image in a class folder of the set (nor what the set ships beside them, ImageNet-A's README.txt)
is foreign, refused. With --on-error skip both are left out and listed. A set whose classes are a
fixed subset of the 1000 records their labels in the manifest (inputs.source.labels), so an
evaluation can mask the logits. Each set's module (imagenet_v2, imagenet_a, imagenet_r,
imagenet_sketch) holds its names and counts and registers it with `register_set`.
"""

from __future__ import annotations

import functools
import os
import tarfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, Tuple

from imagenet_build.catalog.classes import DEFAULT_LABELS_FILE, read_labels_file
from imagenet_build.infra import read_door, storage, write_door
from imagenet_build.infra.errors import BuildError, InputError, PathLike, UsageError
from imagenet_build.model import SplitInput
from imagenet_build.sources.copies import Copy, CopyKind, Piece, listing, register
from imagenet_build.sources.copy_rules import ANY_IMAGE_SUFFIXES, SHOWN, lies_in, once_each, refuse_empty_pieces
from imagenet_build.sources.eval_listing import Item, folder_items, zip_items
from imagenet_build.sources.folders import FolderReader
from imagenet_build.sources.samples import tar_add, tar_gz, validation_images
from imagenet_build.sources.spool import Spool, SpooledCopy, SpoolReader, stamp
from imagenet_build.sources.tars import ArchiveReader, outer_members
from imagenet_build.sources.zips import DEFLATED, STORED, ZipReader, write_zip

if TYPE_CHECKING:
    from imagenet_build.catalog.classes import Catalog
    from imagenet_build.infra.workers import Workers

@functools.lru_cache(maxsize=1)
def sorted_synsets() -> tuple[str, ...]:
    """The 1000 synsets in sorted order: what ImageNetV2's class numbers and A's and R's class indices count."""
    return tuple(sorted(read_labels_file(DEFAULT_LABELS_FILE)))


@dataclass(frozen=True)
class EvalSet:
    """One evaluation set: its names, where it comes from, its classes and size."""

    name: str  # the CopyKind's name, as --from reports it and the manifest records it
    short: str  # its name for `sample --layout`
    archives: Dict[str, str]  # an archive's file name -> the variant it holds ("" for a set of one)
    tops: Dict[str, str]  # the top folder's name (as the archive unpacks) -> its variant
    images: int  # the full set's images (verify --expect-imagenet)
    suffix: str  # its images' suffix (the sample writes it)
    rank: int
    subset: Optional[Tuple[int, ...]] = None  # a fixed subset of the 1000 classes: indices in the sorted list
    numbered: bool = False  # class folders are class numbers 0..999 (ImageNetV2), not synsets
    other_files: Tuple[str, ...] = ()  # files the set ships beside its class folders

    @property
    def synsets(self) -> tuple[str, ...]:
        """Its classes' synsets, sorted."""
        every = sorted_synsets()
        return tuple(every[i] for i in self.subset) if self.subset else every

    def synset_of(self, folder: str) -> str | None:
        """The synset a class folder names, or None where it is no class of the set."""
        if self.numbered:
            ok = folder.isdigit() and str(int(folder)) == folder and int(folder) < len(sorted_synsets())
            return sorted_synsets()[int(folder)] if ok else None
        return folder if folder in self._known else None

    def folder_of(self, synset: str) -> str:
        return str(sorted_synsets().index(synset)) if self.numbered else synset

    @functools.cached_property
    def _known(self) -> frozenset[str]:
        return frozenset(self.synsets)

    @property
    def class_words(self) -> str:
        return f"{self.name}'s {len(self.synsets)} classes"


# ------------------------------------------------------------------ --from: the pieces and the copy


def identify_set(the_set: EvalSet, path: str) -> list[Piece]:
    """The archive (by name), the extracted top folder (by name), or a folder holding either.

    A piece's role is `<kind>:<variant>`: `archive`, `folder`, or `unread` for a top folder found
    beside an archive of its variant in the folder given (the archive is read, the folder named).
    """
    base = storage.basename(path)
    if base in the_set.archives:
        return [Piece(the_set.name, f"archive:{the_set.archives[base]}", path)]
    if not os.path.isdir(path):  # a URL too: a set's folder is read from local files
        return []
    if base in the_set.tops:
        return [Piece(the_set.name, f"folder:{the_set.tops[base]}", path)]
    names = listing(path)
    found = [Piece(the_set.name, f"archive:{variant}", storage.join(path, name))
             for name, variant in sorted(the_set.archives.items()) if names.get(name) is False]
    archived = {variant for name, variant in the_set.archives.items() if names.get(name) is False}
    return found + [Piece(the_set.name, f"{'unread' if variant in archived else 'folder'}:{variant}",
                          storage.join(path, name))
                    for name, variant in sorted(the_set.tops.items()) if names.get(name)]


def _variant(piece: Piece) -> str:
    """The variant a piece's role (`<kind>:<variant>`) names."""
    return piece.role[piece.role.index(":") + 1:]


def assemble_set(the_set: EvalSet, pieces: list[Piece]) -> EvalCopy:
    """One variant's archive or folder (the archive where a folder holds both, the folder named as not read)."""
    variants = sorted({_variant(piece) for piece in pieces})
    if len(variants) > 1:
        raise UsageError(f"--from was given {len(variants)} variants of {the_set.name} ({', '.join(variants)}): "
                         "give the archive or folder of one; each converts to its own output folder")
    archive = next((piece.path for piece in pieces if piece.role.startswith("archive:")), None)
    folder = next((piece.path for piece in pieces if piece.role.startswith("folder:")), None)
    if archive and folder:
        raise UsageError(f"--from was given {the_set.name}'s validation split twice: {archive} and {folder}; give "
                         "one of them")
    unread = next((piece.path for piece in pieces if piece.role.startswith("unread:")), None)
    path = archive or folder or str(unread)
    copy = (SpooledEvalCopy if path.endswith(".tar.gz") else EvalCopy)(the_set, path, variants[0])
    if archive and unread:
        copy.notes.append(f"{unread} not read: the archive {archive} beside it is; give --from the folder itself "
                          "to convert it instead")
    return copy


class EvalCopy(Copy):
    """One evaluation set, as its .tar or .zip archive (read in place) or its extracted top folder."""

    kind: str

    def __init__(self, the_set: EvalSet, path: str, variant: str) -> None:
        form = "archive" if storage.basename(path) in the_set.archives else "folder"
        self.kind, self.notes = the_set.name, []
        self.description = f"{the_set.name} {variant}".strip() + f" {form}"
        self.the_set, self.path, self.variant = the_set, path, variant

    @property
    def splits(self) -> tuple[str, ...]:
        return ("validation",)

    def scan_train(self, catalog: Catalog, on_error: str, pool: Workers) -> SplitInput:
        raise AssertionError("an evaluation set has no train split")

    def listed(self, pool: Workers) -> tuple[SplitInput, list[Item]]:
        """The split to fill, and the files of the archive or folder (paths as they lie in it)."""
        path = self.path
        if path.endswith(".tar"):
            items: list[Item] = [(n, (o, s, crc)) if is_file else (n + "/", None)
                                 for n, o, s, is_file, crc in outer_members(path)]
            return SplitInput("validation", path, "flat-tar", reader=ArchiveReader, stamp=storage.stamp(path)), items
        if path.endswith(".zip"):
            return SplitInput("validation", path, "zip", reader=ZipReader, stamp=storage.stamp(path)), zip_items(path)
        return SplitInput("validation", path, "folders", reader=FolderReader), folder_items(path)

    def scan_validation(self, catalog: Catalog, on_error: str, pool: Workers,
                        labels_loader: Callable[[], list[str]], labels_file: PathLike) -> SplitInput:
        """Labelled by class folder; the validation labels file (ILSVRC2012's images) has no say."""
        result, items = self.listed(pool)
        if result.arrangement == "folders":
            return scan_set(self.the_set, result, items, catalog, on_error, self.path)
        top, inside = split_top(items, self.path, self.the_set, self.variant, on_error, result)
        result.member_prefix = f"{top}/"  # a zip's members are read by name; a tar's errors name them whole
        return scan_set(self.the_set, result, inside, catalog, on_error, f"{self.path}:{top}")

    def recorded(self, catalog: Catalog) -> dict[str, Any]:
        """A fixed subset of the 1000 classes: the labels of its classes, as image/class/label gives them."""
        if not self.the_set.subset:
            return {}
        return {"labels": sorted(catalog.label_of[s] for s in self.the_set.synsets if s in catalog.label_of)}


class SpooledEvalCopy(EvalCopy, SpooledCopy):
    """An evaluation set as a .tar.gz (ImageNetV2's), decompressed once into the spool and read from it."""

    def __init__(self, the_set: EvalSet, path: str, variant: str) -> None:
        self.spool = Spool({"validation": [path]})  # all SpooledCopy.__init__ sets but what EvalCopy's sets
        EvalCopy.__init__(self, the_set, path, variant)

    def listed(self, pool: Workers) -> tuple[SplitInput, list[Item]]:
        folder, (listed,) = self.spool.take("validation", pool)
        members, offsets, sizes, files, crcs, _ = listed
        items: list[Item] = [(m, (offsets[i], sizes[i], crcs[i])) if files[i] else (m + "/", None)
                             for i, m in enumerate(members)]
        return SplitInput("validation", folder, "flat-tar", reader=SpoolReader, stamp=stamp([self.path])), items


def split_top(items: list[Item], path: str, the_set: EvalSet, variant: str, on_error: str, result: SplitInput
              ) -> tuple[str, list[Item]]:
    """(the archive's top folder, its files as paths below it): one of the set's top folders, of `variant`
    (check_top); a file outside it is foreign."""
    tops = Counter(name.partition("/")[0] for name, _ in items if "/" in name)
    refuse_empty_pieces([(path, len(items) - not_images(items))], "validation")
    if not tops:
        raise InputError(path, f"holds no <top folder>/<class>/<image> files: not {the_set.name}'s archive")
    top = max(tops, key=tops.__getitem__)  # the folder most files lie in (the first such)
    check_top(the_set, top, path, variant)
    outside = [name for name, _ in items if not name.startswith(f"{top}/")]
    refuse_foreign(outside, "outside its top folder " + top, f"{path}:", on_error, result)
    return top, [(name[len(top) + 1:], where) for name, where in items if name.startswith(f"{top}/") and
                 name != f"{top}/"]


def check_top(the_set: EvalSet, top: str, path: str, variant: str) -> None:
    """The archive's top folder is one of the set's, of the variant its name says: the variant comes from what
    the archive holds, and a renamed archive of another variant (or of something else) is refused."""
    found = the_set.tops.get(top)
    if found is None and the_set.synset_of(top) is not None:
        raise InputError(path, f"holds its class folders ({top}/ ...) at its top, not in a top folder as "
                               f"{the_set.name}'s archives do ({', '.join(sorted(the_set.tops))}): archive them "
                               "inside one, or extract them into one and give --from that folder")
    if found is None:
        raise InputError(f"{path}:{top}/", f"a top folder none of {the_set.name}'s archives has (theirs: "
                                           f"{', '.join(sorted(the_set.tops))}): not {the_set.name}'s archive")
    if found != variant:
        named = next(name for name, v in the_set.archives.items() if v == found)
        raise InputError(path, f"holds {top}/, {the_set.name}'s {found} variant, but its name says {variant}: "
                               f"a renamed archive? name it {named}")


def not_images(items: list[Item]) -> int:
    """How many of the items are no image (a README beside the class folders): an archive of only those is empty."""
    return sum(1 for name, _ in items if not name.lower().endswith(ANY_IMAGE_SUFFIXES))


def refuse_foreign(names: list[str], what: str, prefix: str, on_error: str, result: SplitInput) -> None:
    """Files that are no image of the set: one line naming the first (at `prefix` + its name) under --on-error
    fail, else left out and listed."""
    if not names:
        return
    if on_error == "fail":
        raise InputError(prefix + names[0], f"a foreign file ({what}; {len(names)} such): not part of the set; "
                                            "remove it, or --on-error skip to leave it out")
    result.left_out.extend((name, f"a foreign file ({what})") for name in names)


def scan_set(the_set: EvalSet, result: SplitInput, items: list[Item], catalog: Catalog, on_error: str,
             where: str) -> SplitInput:
    """The set's images below its top folder (`where` names it), in slim's order, labelled by class folder."""
    by_folder: dict[str, list[Item]] = {}
    foreign: list[str] = []
    folders = set()
    for name, at in items:
        folder, _, base = name.partition("/")
        if not base and name in the_set.other_files:
            continue  # shipped with the set: neither an image nor foreign
        if name == f"{folder}/":
            folders.add(folder)  # a folder, as such: its files come as items of their own
            continue
        if base and "/" not in base and base.lower().endswith(ANY_IMAGE_SUFFIXES) and not base.startswith("."):
            if the_set.synset_of(folder) is None:
                foreign.append(name)
            else:
                by_folder.setdefault(folder, []).append((name, at))
        else:
            foreign.append(name)
    outside_classes = [n for n in foreign if "/" in n and the_set.synset_of(n.partition("/")[0]) is None]
    refuse_foreign(outside_classes, f"in a class folder that is not one of {the_set.class_words}", where + "/",
                   on_error, result)
    refuse_foreign([n for n in foreign if n not in outside_classes], f"not an image in a class folder "
                   f"(<class>/<name>{the_set.suffix})", where + "/", on_error, result)
    synset_folder = {the_set.synset_of(folder): folder for folder in by_folder}
    refuse_partial(the_set, synset_folder, folders, catalog, on_error, where, result)
    outside = sum(len(by_folder[f]) for s, f in synset_folder.items() if s not in catalog.label_of)
    if outside:
        result.notes.append(f"validation: {outside} image(s) left out: their classes are not in "
                            f"{catalog.labels_file}")
    place = lies_in(where)
    for label, synset in enumerate(catalog.synsets, start=1):
        folder_name = synset_folder.get(synset)
        if folder_name is not None:
            # by name; a name twice (refused, or its first kept) in the order the archive holds them
            for name, where_in in once_each(sorted(by_folder[folder_name]), place, result, on_error):
                result.add(name, label, where_in)
    if not result.relpaths:
        raise InputError(where, f"holds no images of {the_set.class_words} that {catalog.labels_file} names")
    result.path_names = True
    return result


def refuse_partial(the_set: EvalSet, synset_folder: dict[Any, str], folders: set[str], catalog: Catalog,
                   on_error: str, where: str, result: SplitInput) -> None:
    """A class of the set that the labels file names, without images (its folder missing, or in `folders`: there
    and empty): the copy is partial."""
    missing = [s for s in the_set.synsets if s in catalog.label_of and s not in synset_folder]
    if not missing:
        return
    empty = [s for s in missing if the_set.folder_of(s) in folders]
    mixed = 0 < len(empty) < len(missing)
    what = "no class folder, or an empty one" if mixed else "an empty class folder" if empty else "no class folder"
    shown = ", ".join(the_set.folder_of(s) + (f" ({s})" if the_set.numbered else "") for s in missing[:3])
    if on_error == "fail":
        raise InputError(where, f"{what}{',' if mixed else ''} for {len(missing)} of {the_set.class_words} ({shown}"
                                f"{' ...' if len(missing) > 3 else ''}): a partial copy (an interrupted download or "
                                "extraction?); download it again, pass a --labels-file without those classes, or "
                                "--on-error skip to build without them")
    result.empty_classes.extend(missing)
    result.left_out.extend((f"{the_set.folder_of(s)}/", f"class folder {'empty' if s in empty else 'missing'}: "
                            "a partial copy") for s in missing)
    result.notes.append(f"validation: {len(missing)} of {the_set.class_words} have {what}: "
                        + ", ".join(missing[:SHOWN]))


# ------------------------------------------------------------------ sample --layout


def write_set_sample(the_set: EvalSet, ilsvrc_sample: Path, out: Path) -> None:
    """The sample's validation images in the set's shape: class k of the sample is class k of a set with a fixed
    subset (labels.txt then the 1000 synsets up to its last class, so labels are the 1000-class ones), its own
    class otherwise; each image keeps its name's stem with the set's suffix."""
    sample_synsets = read_door.read_text(Path(ilsvrc_sample) / "labels.txt").split()
    if the_set.subset:
        if len(sample_synsets) > len(the_set.synsets):
            raise BuildError(f"--layout {the_set.short}: {len(sample_synsets)} classes, the set has "
                             f"{len(the_set.synsets)}; lower --classes")
        mapping = dict(zip(sample_synsets, the_set.synsets))
        last = sorted_synsets().index(the_set.synsets[len(sample_synsets) - 1])
        labels = "".join(s + "\n" for s in sorted_synsets()[:last + 1])
        write_door.write_bytes(Path(out) / "labels.txt", labels.encode(), sync=False)
    else:
        unknown = [s for s in sample_synsets if s not in sorted_synsets()]
        if unknown:
            raise BuildError(f"--layout {the_set.short}: {unknown[0]} is not one of the 1000 classes")
        mapping = {s: s for s in sample_synsets}
    archive, variant = next(iter(the_set.archives.items()))
    top = next(name for name, v in the_set.tops.items() if v == variant)
    members = [(f"{top}/{other}", f"The {the_set.name} sample.\n".encode()) for other in the_set.other_files]
    members += [(f"{top}/{the_set.folder_of(mapping[synset])}/{path.stem}{the_set.suffix}",
                 read_door.read_bytes(path)) for path, synset in validation_images(ilsvrc_sample)]
    target = Path(out) / archive
    if archive.endswith(".tar.gz"):
        tar_gz(target, members)
    elif archive.endswith(".zip"):  # as zip tools write them: deflated, now and then stored
        write_zip(target, [(name, data, STORED if n % 2 else DEFLATED, False)
                           for n, (name, data) in enumerate(members)])
    else:
        with write_door.new_file(target) as f, tarfile.open(fileobj=f, mode="w", format=tarfile.GNU_FORMAT) as tar:
            for name, data in members:
                tar_add(tar, name, data)


def register_set(the_set: EvalSet) -> CopyKind:
    """The set as a copy --from and `sample --layout` know."""
    return register(CopyKind(
        the_set.name, functools.partial(identify_set, the_set), functools.partial(assemble_set, the_set),
        rank=the_set.rank, short=the_set.short, write_sample=functools.partial(write_set_sample, the_set),
        totals={"validation": the_set.images}, classes=len(the_set.synsets), evaluation=True))


