"""slim's `tf.train.Example`: encode deterministically, decode, without TensorFlow.

The message types are TensorFlow's `example.proto`/`feature.proto` (package
`tensorflow`, same field numbers), declared here at run time with the protobuf
library in a private descriptor pool, so that nothing clashes with TensorFlow's
own copy when both are loaded. Serialization uses protobuf's deterministic mode
(map keys sorted), so the same record always gives the same bytes.
"""

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_F = descriptor_pb2.FieldDescriptorProto

# The 15 keys of every record (REFERENCE §1), with their value type.
SCHEMA = {
    "image/height": "int64",
    "image/width": "int64",
    "image/colorspace": "bytes",
    "image/channels": "int64",
    "image/class/label": "int64",
    "image/class/synset": "bytes",
    "image/class/text": "bytes",
    "image/object/bbox/xmin": "float",
    "image/object/bbox/xmax": "float",
    "image/object/bbox/ymin": "float",
    "image/object/bbox/ymax": "float",
    "image/object/bbox/label": "int64",
    "image/format": "bytes",
    "image/filename": "bytes",
    "image/encoded": "bytes",
}
_LIST_FIELD = {"bytes": "bytes_list", "float": "float_list", "int64": "int64_list"}


def _declare_messages():
    f = descriptor_pb2.FileDescriptorProto(
        name="imagenet_build/tf_example.proto", package="tensorflow", syntax="proto3"
    )

    def message(name, *fields, nested=()):
        m = f.message_type.add(name=name)
        for nested_message in nested:
            m.nested_type.add().CopyFrom(nested_message)
        for field in fields:
            m.field.add().CopyFrom(field)
        return m

    def field(name, number, kind, label=_F.LABEL_OPTIONAL, type_name=None, oneof=None):
        fd = _F(name=name, number=number, type=kind, label=label)
        if type_name:
            fd.type_name = type_name
        if oneof is not None:
            fd.oneof_index = oneof
        return fd

    repeated = _F.LABEL_REPEATED
    message("BytesList", field("value", 1, _F.TYPE_BYTES, repeated))
    message("FloatList", field("value", 1, _F.TYPE_FLOAT, repeated))  # proto3: packed
    message("Int64List", field("value", 1, _F.TYPE_INT64, repeated))
    feature = message(
        "Feature",
        field("bytes_list", 1, _F.TYPE_MESSAGE, type_name=".tensorflow.BytesList", oneof=0),
        field("float_list", 2, _F.TYPE_MESSAGE, type_name=".tensorflow.FloatList", oneof=0),
        field("int64_list", 3, _F.TYPE_MESSAGE, type_name=".tensorflow.Int64List", oneof=0),
    )
    feature.oneof_decl.add(name="kind")
    entry = descriptor_pb2.DescriptorProto(name="FeatureEntry")
    entry.field.add().CopyFrom(field("key", 1, _F.TYPE_STRING))
    entry.field.add().CopyFrom(field("value", 2, _F.TYPE_MESSAGE, type_name=".tensorflow.Feature"))
    entry.options.map_entry = True
    message(
        "Features",
        field("feature", 1, _F.TYPE_MESSAGE, repeated, type_name=".tensorflow.Features.FeatureEntry"),
        nested=[entry],
    )
    message("Example", field("features", 1, _F.TYPE_MESSAGE, type_name=".tensorflow.Features"))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("tensorflow.Example"))


Example = _declare_messages()


def encode_example(*, encoded, filename, height, width, label, synset, text, boxes=()):
    """Serialized slim Example for one image. `boxes` is a sequence of (xmin, ymin, xmax, ymax)."""
    example = Example()
    feature = example.features.feature

    def put(key, kind, values):
        getattr(feature[key], kind).value.extend(values)

    put("image/height", "int64_list", [height])
    put("image/width", "int64_list", [width])
    put("image/colorspace", "bytes_list", [b"RGB"])
    put("image/channels", "int64_list", [3])
    put("image/class/label", "int64_list", [label])
    put("image/class/synset", "bytes_list", [synset.encode()])
    put("image/class/text", "bytes_list", [text.encode()])
    put("image/object/bbox/xmin", "float_list", [b[0] for b in boxes])
    put("image/object/bbox/ymin", "float_list", [b[1] for b in boxes])
    put("image/object/bbox/xmax", "float_list", [b[2] for b in boxes])
    put("image/object/bbox/ymax", "float_list", [b[3] for b in boxes])
    put("image/object/bbox/label", "int64_list", [label] * len(boxes))
    put("image/format", "bytes_list", [b"JPEG"])
    put("image/filename", "bytes_list", [filename.encode()])
    put("image/encoded", "bytes_list", [encoded])
    for key, kind in SCHEMA.items():  # empty lists still need their (empty) list message set
        getattr(feature[key], _LIST_FIELD[kind]).SetInParent()
    return example.SerializeToString(deterministic=True)


def decode_example(payload):
    """{key: list of values} for every feature of a serialized Example (bytes stay bytes)."""
    example = Example()
    example.ParseFromString(payload)
    out = {}
    for key, feature in example.features.feature.items():
        kind = feature.WhichOneof("kind")
        out[key] = list(getattr(feature, kind).value) if kind else []
    return out

