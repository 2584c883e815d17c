"""DALI index files (REFERENCE §7): one `<offset> <size>` line per record, size = 16 + payload.

Byte-identical to what DALI's `tfrecord2idx` writes for a sound file.
"""


def index_line(offset, size):
    return f"{offset} {size}\n"


def index_text(entries):
    """Index file contents for [(offset, size)] records."""
    return "".join(index_line(offset, size) for offset, size in entries)


def read_index(path):
    """[(offset, size)] from an index file; ValueError naming the line when one is malformed."""
    entries = []
    with open(path, encoding="ascii", errors="replace") as f:
        for number, line in enumerate(f, start=1):
            parts = line.rstrip("\n").split(" ")
            if len(parts) != 2 or not all(p.isdigit() for p in parts):
                raise ValueError(f"line {number} is not '<offset> <size>': {line.rstrip()!r}")
            entries.append((int(parts[0]), int(parts[1])))
    return entries
