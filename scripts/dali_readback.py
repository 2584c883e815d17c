"""Read every shard of a build back through DALI's TFRecord reader on the CPU.

Counts records per split against manifest.json. Stands in for `trainer-check`
until that verb exists.
"""

import json
import sys
from pathlib import Path

from nvidia.dali import fn, pipeline_def
import nvidia.dali.tfrecord as tfrec

BATCH = 16


def read_split(out, manifest, split):
    shards = [s for s in manifest["shards"] if s["split"] == split]
    index_dir = out / manifest["options"]["index_dir"]
    paths = [str(out / s["name"]) for s in shards]
    indexes = [str(index_dir / (s["name"] + ".idx")) for s in shards]

    @pipeline_def(batch_size=BATCH, num_threads=2, device_id=None)
    def pipeline():
        r = fn.readers.tfrecord(
            path=paths,
            index_path=indexes,
            features={
                "image/encoded": tfrec.FixedLenFeature((), tfrec.string, ""),
                "image/class/label": tfrec.FixedLenFeature([1], tfrec.int64, -1),
            },
            name="Reader",
            pad_last_batch=True,
        )
        images = fn.decoders.image(r["image/encoded"], device="cpu")
        images = fn.resize(images, resize_x=224, resize_y=224)
        return images, r["image/class/label"]

    pipe = pipeline()
    pipe.build()
    epoch = pipe.reader_meta("Reader")["epoch_size"]
    labels = []
    for _ in range(-(-epoch // BATCH)):
        images, label = pipe.run()
        labels.extend(int(label.at(i)[0]) for i in range(len(label)))
    labels = labels[:epoch]
    expected = manifest["splits"][split]["records"]
    ok = epoch == expected and min(labels) >= 1
    print(f"{split}: DALI read {epoch} records (manifest: {expected}), labels {min(labels)}..{max(labels)}"
          f" -> {'ok' if ok else 'MISMATCH'}")
    return ok


def main(out):
    out = Path(out)
    manifest = json.loads((out / "manifest.json").read_text())
    results = [read_split(out, manifest, split) for split in manifest["splits"]]
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main(sys.argv[1])
