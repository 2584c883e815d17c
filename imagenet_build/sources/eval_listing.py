"""The files of an evaluation set's archive or extracted folder, as eval_sets.py reads them: each file's path in it
(a folder as `<name>/`) and where its bytes lie."""

from __future__ import annotations

import os
from typing import Tuple

from imagenet_build.infra import read_door, storage
from imagenet_build.infra.errors import input_errors
from imagenet_build.model import Where
from imagenet_build.sources.copy_rules import scan_folder
from imagenet_build.sources.zips import LOCAL_SIZE, Places, central_members, check_member, end_record, pack_member_info

Item = Tuple[str, Where]  # (a file's path below the top folder's parent, or below the top folder; where it lies)


def zip_items(path: str) -> list[Item]:
    """The files of a zip read in place, each checked readable (check_member) and in its place (Places)."""
    items: list[Item] = []
    with input_errors(path, expected="a zip archive", missing="zip not found"):
        size = storage.size(path)
        places, overlap = Places(), None
        with read_door.open_read(path, random_access=True) as f:
            cd_offset, cd_size, count = end_record(f, size, path)
            for name, offset, csize, usize, crc, method, flags, name_len in central_members(f, cd_offset, cd_size,
                                                                                             count, path):
                overlap = overlap or places.add(offset, offset + LOCAL_SIZE + name_len + csize)
                if name.endswith("/"):
                    items.append((name, None))
                else:
                    check_member(path, name, csize, usize, method, flags)
                    items.append((name, (offset, csize, pack_member_info(method, usize, crc))))
            places.check(f, path, (cd_offset, cd_size, count), overlap)
    return items


def folder_items(top: str) -> list[Item]:
    """The files below an extracted top folder, as paths below it (its class folders' files, and any other), and
    its folders, each as `<name>/`, as an archive lists its folder members."""
    folders, files = scan_folder(top)
    items: list[Item] = [(name, None) for name in files]
    for folder in folders:
        items.append((f"{folder}/", None))
        inner, names = scan_folder(os.path.join(top, folder))
        items.extend((f"{folder}/{name}/", None) for name in inner)
        items.extend((f"{folder}/{name}", None) for name in names)
    return items
