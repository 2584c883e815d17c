"""Synthetic epochs for trainer-check's checks (tests/trainercheck/test_trainer_checks.py, test_trainer_report.py):
two small shard files and the records an epoch delivered from them, without a pipeline."""

from imagenet_build.format.tfrecord import frame

MANIFEST = {"splits": {"train": {"records": 5, "label_counts": {"1": 2, "2": 3}}}}


def two_shards(folder):
    """Two shard files of 3 and 2 records in `folder`: what check_epoch counts against."""
    paths = []
    for name, count in (("train-00000-of-00002", 3), ("train-00001-of-00002", 2)):
        data = b""
        for k in range(count):
            payload = f"record {k}".encode()
            head, foot = frame(payload)
            data += head + payload + foot
        (folder / name).write_bytes(data)
        paths.append(str(folder / name))
    return paths


def epoch(shards, ranks=1, labels=(1, 2, 1, 2, 2)):
    """(rank, file, offset, filename, label) for the 5 records, spread over `ranks` contiguous ranges."""
    places = [(shards[0], 0), (shards[0], 24), (shards[0], 48), (shards[1], 0), (shards[1], 24)]
    return [(k * ranks // 5, file, offset, f"img{k}.JPEG", labels[k]) for k, (file, offset) in enumerate(places)]
