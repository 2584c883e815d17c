"""format/naming.py: every file name of a build."""

from imagenet_build.format import naming


def test_shard_names_round_trip_and_reject_others():
    name = naming.shard_name("train", 7, 1024)
    assert name == "train-00007-of-01024" and naming.parse_shard_name(name) == ("train", 7, 1024)
    assert naming.is_build_shard(name) and not naming.is_build_shard("test-00000-of-00001")
    assert naming.parse_shard_name("train-7-of-1024") is None
    assert naming.shard_of_index(naming.index_name("/x/" + name)) == name
    assert naming.is_temp_name(naming.temp_name("/x/manifest.json").name)

