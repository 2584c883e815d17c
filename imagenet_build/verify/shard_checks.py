"""The checks of each shard file and its index: framing, and the index against the records' real offsets
(format/dali_index.py's rule, the one every reader holds indexes to)."""

from __future__ import annotations

from typing import Iterable

from imagenet_build.format.dali_index import check_index
from imagenet_build.verify.problems import Finding
from imagenet_build.verify.shard import Shard, ShardCheck


class Framing(ShardCheck):
    name, rank = "framing", 10
    covers = "record lengths and their CRCs; the file ends where the last record ends"

    def run_shard(self, shard: Shard) -> Iterable[Finding]:
        error = shard.framing_error
        if error is not None:
            return (Finding(shard.name, len(shard.entries), error.offset, error.message),)
        if not shard.entries:
            return (Finding(shard.name, None, 0, "shard holds no records"),)
        return ()


class Index(ShardCheck):
    """Each index against its shard (an index with no shard is the folder listing's to find)."""

    name, rank = "index", 30
    covers = "DALI index: present, numeric, contiguous from 0 to the file size, one line per record"

    def run_shard(self, shard: Shard) -> Iterable[Finding]:
        if shard.index_unreadable:
            return (Finding(shard.index_name, None, None, shard.index_unreadable),)
        if not shard.framing_sound:  # an index can only be judged against sound framing
            return ()
        return [Finding(shard.index_name, line, at, message)
                for line, at, message in check_index(shard.index_bytes, shard.entries, shard.size)]
