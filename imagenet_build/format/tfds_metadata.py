"""features.json and dataset_info.json: what makes a build folder a TensorFlow Datasets folder.

TFDS opens TFRecords of `tf.train.Example`s that another tool wrote (`tfds.builder_from_directory`) when
two files lie beside them: features.json, the feature connectors that decode each Example, and
dataset_info.json, each split's shard lengths (what `len()`, `even_splits` and slicing such as
`train[:10%]` are computed from) and the template of its file names (`{SPLIT}-{SHARD_X_OF_Y}` is slim's
`train-00000-of-01024`). Both are the JSON form of TFDS's own protos (feature.proto, dataset_info.proto),
written here from plain values, without TensorFlow or TFDS; docs/readers.md shows them opened.

How slim's keys become TFDS features (the caller says which key holds the image and which the label):
the image is TFDS's `Image` (decoded to uint8 [H, W, 3]); the label a `ClassLabel` that names every
label, 0 included (slim's labels are 1-based, 0 is background), its names inline in features.json so
that the two files are the whole of it; a key holding one value a `Text` (bytes) or a scalar `Tensor`;
any other key (the boxes, ReaL labels) a `Sequence`, which reads an empty or absent list as empty.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any, NamedTuple

from imagenet_build.format.naming import DATASET_INFO_JSON, FEATURES_JSON, TFDS_FILES
from imagenet_build.infra import read_door, storage, write_door
from imagenet_build.infra.errors import PathLike

DATASET_NAME = "imagenet_build"  # TFDS's name of the dataset (its builder's); the same for every build
DATASET_VERSION = "1.0.0"  # TFDS requires one; the form of these two files, bumped if it changes
TFDS_FILE_LIMIT = 64 << 20  # bytes: dataset_info.json lists each shard's length, some tens of KB for ImageNet
FILE_TEMPLATE = "{SPLIT}-{SHARD_X_OF_Y}"  # TFDS's template of slim's shard names: train-00000-of-01024
BACKGROUND = "background"  # label 0's name, as slim's readable names have it
_CLASSES = "tensorflow_datasets.core.features."
_DTYPES = {"int64": "int64", "float": "float32"}  # the schema's value types as TFDS names them ("bytes": Text)


class RecordSchema(NamedTuple):
    """What features.json describes of every record: each key's value type ("bytes", "int64", "float"), the
    keys that hold exactly one value, and which key is the encoded image and which the label."""

    types: Mapping[str, str]
    one_value: Collection[str]
    image: str
    label: str


class SplitShards(NamedTuple):
    """One split as dataset_info.json lists it: its name, the records of each shard in order, its bytes."""

    name: str
    shard_lengths: Sequence[int]
    num_bytes: int


def label_names(class_names: Sequence[str]) -> list[str]:
    """The name of every label, 0 included: label k (1-based) is class_names[k - 1], and label 0 is
    BACKGROUND, or a name no class has (TFDS refuses two labels of one name)."""
    background = BACKGROUND
    while background in class_names:
        background = "_" + background
    return [background, *class_names]


def _feature(kind: str, content: Mapping[str, Any], description: str = "") -> dict[str, Any]:
    """One feature connector as feature.proto's JSON names it."""
    feature = {"pythonClassName": _CLASSES + kind, _kind_field(kind): dict(content)}
    if description:
        feature["description"] = description
    return feature


def _kind_field(kind: str) -> str:
    """The field of feature.proto's `content` oneof a connector class fills (image_feature.Image -> image)."""
    return {"features_dict.FeaturesDict": "featuresDict", "image_feature.Image": "image", "text_feature.Text": "text",
            "tensor_feature.Tensor": "tensor", "sequence_feature.Sequence": "sequence",
            "class_label_feature.ClassLabel": "jsonFeature"}[kind]


def _scalar(dtype: str) -> dict[str, Any]:
    return _feature("tensor_feature.Tensor", {"shape": {}, "dtype": _DTYPES[dtype], "encoding": "none"})


def _connector(key: str, schema: RecordSchema, class_names: Sequence[str], image_format: str) -> dict[str, Any]:
    kind = schema.types[key]
    if key == schema.image:
        return _feature("image_feature.Image", {"shape": {"dimensions": ["-1", "-1", "3"]}, "dtype": "uint8",
                                                "encodingFormat": image_format})
    if key == schema.label:
        # ClassLabel's own proto holds only the number of classes (TFDS keeps names in a third file); its JSON
        # form, which TFDS also reads, holds the names
        return _feature("class_label_feature.ClassLabel", {"json": json.dumps({"names": label_names(class_names)})},
                        "1-based: label k is the build's class k (line k of its labels file); no record holds 0 "
                        "(background)")
    if key not in schema.one_value:
        return _feature("sequence_feature.Sequence", {"feature": _scalar(kind), "length": "-1"})
    return _feature("text_feature.Text", {}) if kind == "bytes" else _scalar(kind)


def features_json(schema: RecordSchema, class_names: Sequence[str], image_format: str = "jpeg") -> dict[str, Any]:
    """features.json: a FeaturesDict of every key of the schema, by its key (as slim's parse names them)."""
    features = {key: _connector(key, schema, class_names, image_format) for key in sorted(schema.types)}
    return _feature("features_dict.FeaturesDict", {"features": features})


def dataset_info_json(splits: Sequence[SplitShards], schema: RecordSchema, description: str) -> dict[str, Any]:
    """dataset_info.json: the dataset's name and version, its splits (in name order) with their shard lengths,
    bytes and file template, and (image, label) as the supervised keys (as_supervised=True)."""
    return {
        "name": DATASET_NAME,
        "version": DATASET_VERSION,
        "description": description,
        "fileFormat": "tfrecord",
        "splits": [{"name": split.name, "shardLengths": [str(n) for n in split.shard_lengths],
                    "numBytes": str(split.num_bytes), "filepathTemplate": FILE_TEMPLATE}
                   for split in sorted(splits)],
        "supervisedKeys": {"input": schema.image, "output": schema.label},
    }


def encode(document: Mapping[str, Any]) -> bytes:
    """The bytes of one of the files: sorted keys, so the same build always gives the same bytes."""
    return (json.dumps(document, indent=1, sort_keys=True) + "\n").encode()


def tfds_documents(features: Mapping[str, Any], dataset_info: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """{file name: its document}, features.json first: the order they are written in."""
    return {FEATURES_JSON: features, DATASET_INFO_JSON: dataset_info}


def write_tfds_files(output_dir: PathLike, documents: Mapping[str, Mapping[str, Any]]) -> None:
    """Each file atomically (a temp file renamed, or one upload): a reader sees the old file or the new one."""
    for name, document in documents.items():
        write_door.write_bytes(storage.join(output_dir, name), encode(document), within=output_dir)


def remove_tfds_files(output_dir: PathLike) -> None:
    """Remove both where they are: a build being written is no TFDS folder (its shard lengths are not final)."""
    for name in TFDS_FILES:
        path = storage.join(output_dir, name)
        if storage.exists(path):
            write_door.remove(path, within=output_dir)


def read_tfds_file(output_dir: PathLike, name: str) -> Any:
    """One of the files parsed, or None where there is none; ValueError ("not valid JSON ...") for one that is
    not JSON text, or cannot be read (not a regular file, larger than any such file)."""
    try:
        data = read_door.read_bytes(storage.join(output_dir, name), TFDS_FILE_LIMIT)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise ValueError(e.strerror or str(e)) from None
    try:
        return json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError is a ValueError
        raise ValueError(f"not valid JSON ({type(e).__name__}: {str(e)[:80]})") from None


def differences(found: Any, expected: Any, where: str = "") -> list[str]:
    """Where one of the files (parsed) disagrees with what the build implies, one line each ("<where>: <found>,
    the build's: <expected>"): splits are matched by name, a ClassLabel's names compared as names, nothing
    may be missing or more than the build's, and descriptions (free text) may say anything."""
    if isinstance(expected, dict) and isinstance(found, dict):
        lines = [f"{where}{key}: missing" for key in expected if key not in found]
        lines += [f"{where}{key}: not in the build's" for key in found if key not in expected]
        for key in expected:
            if key in found and key != "description":  # free text, for people
                found_value, expected_value = _comparable(key, found[key], expected[key])
                lines += differences(found_value, expected_value, where if key in _WRAPPERS else f"{where}{key}.")
        return lines
    if isinstance(expected, list) and isinstance(found, list) and where.endswith("splits."):
        return differences(_by_name(found), _by_name(expected), where)
    where = where.rstrip(".") or "the file"
    if isinstance(expected, list) and isinstance(found, list) and len(found) == len(expected) and \
            not _same(found, expected):
        k = next(k for k, (a, b) in enumerate(zip(found, expected)) if not _same(a, b))
        return [f"{where}[{k}]: {_short(found[k])}, the build's: {_short(expected[k])}"]
    if not _same(found, expected):
        return [f"{where}: {_short(found)}, the build's: {_short(expected)}"]
    return []


def _same(found: Any, expected: Any) -> bool:
    """Equal JSON values; an int64 as a number or, as protobuf writes it, a string (TFDS reads both)."""
    if isinstance(found, list) and isinstance(expected, list):
        return len(found) == len(expected) and all(_same(a, b) for a, b in zip(found, expected))
    if isinstance(found, int) and not isinstance(found, bool) and isinstance(expected, str):
        return str(found) == expected
    return type(found) is type(expected) and found == expected


_WRAPPERS = ("featuresDict", "features", "jsonFeature", "json")  # left out of the places named: image/width, not
# featuresDict.features.image/width


def _comparable(key: str, found: Any, expected: Any) -> tuple[Any, Any]:
    """A jsonFeature's JSON text (a ClassLabel's names) parsed, so that the names are compared one by one."""
    if key == "json" and isinstance(found, str) and isinstance(expected, str):
        try:
            return json.loads(found), json.loads(expected)
        except (ValueError, RecursionError):
            pass
    return found, expected


def _by_name(splits: list[Any]) -> Any:
    """dataset_info.json's splits as {name: split}; a list that is not one of splits each named once stays as it is
    (then compared as a list: nothing in it is lost)."""
    names = [s.get("name") if isinstance(s, dict) else None for s in splits]
    if not all(isinstance(name, str) for name in names) or len(set(names)) != len(names):
        return splits
    return {s["name"]: s for s in splits}


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 70 else text[:67] + "..."
