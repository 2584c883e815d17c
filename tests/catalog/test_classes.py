"""catalog/classes.py: the three ImageNet list files (labels, metadata, validation labels), a catalog of class folders
and --subset's lists, read as given and refused in their exact words (line numbers from 1, the file named)."""

import os

import pytest

from imagenet_build.catalog.classes import (
    DEFAULT_LABELS_FILE,
    DEFAULT_METADATA_FILE,
    SUBSET_TRAIN_IMAGES,
    catalog_from_folders,
    imagenet_synsets,
    load_catalog,
    read_labels_file,
    read_metadata_file,
    read_subset,
    read_synset_list,
    read_validation_labels,
)
from imagenet_build.infra.errors import InputError, UsageError


def written(path, text):
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return path


def refusal(call, *args):
    with pytest.raises(InputError) as refused:
        call(*args)
    return str(refused.value)


def test_a_list_is_read_without_a_bom_line_ends_or_trailing_blank_lines(tmp_path):
    path = written(tmp_path / "l.txt", "\ufeffn01\r\n n02 \nn03\n\n  \n\n")
    assert read_synset_list(path, "synset") == ["n01", "n02", "n03"]
    assert read_synset_list(written(tmp_path / "one.txt", "n01"), "synset") == ["n01"]


@pytest.mark.parametrize("text,problem", [
    ("n01\n\nn02\n", "line 2: expected one class id per line, got ''"),
    ("n01\nn02 n03\n", "line 2: expected one class id per line, got 'n02 n03'"),
    (" two words\n", "line 1: expected one class id per line, got ' two words'"),
    ("n01\n \nn02\n\n", "line 2: expected one class id per line, got ' '"),
    ("", "is empty; expected one class id per line"),
    ("\n \n", "is empty; expected one class id per line"),
    (b"n01\n\xff\n", "not UTF-8 text (byte 4)"),
])
def test_a_list_with_a_wrong_line_is_refused_naming_the_file_and_line(tmp_path, text, problem):
    path = written(tmp_path / "l.txt", text)
    assert refusal(read_synset_list, path, "class id") == f"{path}: {problem}"


def test_a_list_that_is_not_a_readable_file_is_named(tmp_path):
    assert refusal(read_synset_list, tmp_path / "none.txt", "synset") == f"{tmp_path / 'none.txt'}: file not found"
    assert refusal(read_synset_list, tmp_path, "synset") == f"{tmp_path}: is a folder, expected a text file"


def test_a_labels_file_is_the_synsets_in_label_order_each_once(tmp_path):
    assert read_labels_file(written(tmp_path / "l.txt", "n02\nn01\n")) == ["n02", "n01"]
    path = written(tmp_path / "twice.txt", "n01\nn02\nn03\nn02\n")
    assert refusal(read_labels_file, path) == f"{path}: line 4: synset n02 repeats line 2"
    path = written(tmp_path / "words.txt", "n01\nn02 x\n")
    assert refusal(read_labels_file, path) == f"{path}: line 2: expected one synset per line, got 'n02 x'"


def test_a_metadata_file_maps_each_synset_to_its_text_stripped(tmp_path):
    path = written(tmp_path / "m.txt", "n01\ttench, Tinca tinca\r\n n02 \t  goldfish  \nn03\t\n")
    assert read_metadata_file(path) == {"n01": "tench, Tinca tinca", "n02": "goldfish", "n03": ""}


@pytest.mark.parametrize("line", ["n01 tench", "n01\ttench\tfish", "n01\ttench\t", "\ttench", " \ttench"])
def test_a_metadata_line_not_synset_tab_text_is_refused(tmp_path, line):
    path = written(tmp_path / "m.txt", f"n00\tok\n{line}\n")
    assert refusal(read_metadata_file, path) == f"{path}: line 2: expected '<synset><TAB><text>', got {line!r}"


def test_an_empty_metadata_file_is_refused(tmp_path):
    path = written(tmp_path / "m.txt", "\n\n")
    assert refusal(read_metadata_file, path) == f"{path}: is empty; expected '<synset><TAB><text>' lines"


def test_the_shipped_catalog_is_ilsvrc2012s_thousand_classes():
    catalog = load_catalog()
    assert catalog.num_classes == 1000 and catalog.is_imagenet
    assert (catalog.synset(1), catalog.text(1)) == ("n01440764", "tench, Tinca tinca")
    assert (catalog.synset(1000), catalog.text(1000)) == ("n15075141", "toilet tissue, toilet paper, bathroom tissue")
    assert catalog.label_of["n01440764"] == 1 and catalog.label_of["n15075141"] == 1000
    assert (catalog.labels_file, catalog.metadata_file) == (str(DEFAULT_LABELS_FILE), str(DEFAULT_METADATA_FILE))
    assert len(catalog.texts) == 1000
    assert load_catalog(DEFAULT_LABELS_FILE, DEFAULT_METADATA_FILE) == catalog


def test_a_labels_file_of_a_subset_gives_labels_in_its_order(tmp_path):
    labels = written(tmp_path / "l.txt", "n01443537\nn01440764\n")
    catalog = load_catalog(labels)
    assert catalog.synsets == ("n01443537", "n01440764") and not catalog.is_imagenet
    assert catalog.label_of == {"n01443537": 1, "n01440764": 2}
    assert catalog.texts == {"n01443537": "goldfish, Carassius auratus", "n01440764": "tench, Tinca tinca"}
    assert (catalog.labels_file, catalog.metadata_file) == (str(labels), str(DEFAULT_METADATA_FILE))
    copy = written(tmp_path / "copy.txt", DEFAULT_LABELS_FILE.read_bytes())
    assert load_catalog(copy).is_imagenet


@pytest.mark.parametrize("unknown,shown", [(5, "x0, x1, x2, x3, x4"), (6, "x0, x1, x2, x3, x4 ...")])
def test_synsets_without_a_text_are_counted_and_the_first_five_named(tmp_path, unknown, shown):
    labels = written(tmp_path / "l.txt", "n01\n" + "".join(f"x{i}\n" for i in range(unknown)))
    metadata = written(tmp_path / "m.txt", "n01\tone\n")
    assert refusal(load_catalog, labels, metadata) == (
        f"{labels}: {unknown} synset(s) have no text in {metadata}: {shown}; "
        "fix the labels file or pass the matching --metadata-file")


def test_imagenet_synsets_are_the_thousand_sorted():
    synsets = imagenet_synsets()
    assert synsets == tuple(sorted(load_catalog().synsets)) and len(synsets) == 1000
    assert synsets[:2] == ("n01440764", "n01443537") and synsets[-1] == "n15075141"


def test_a_catalog_of_class_folders_labels_them_in_sorted_order(tmp_path):
    root = tmp_path / "train"
    for name in ("zebra", "ant", ".hidden", "n01"):
        (root / name).mkdir(parents=True)
    written(root / "a-file.txt", "not a class")
    catalog = catalog_from_folders(root)
    assert catalog.synsets == ("ant", "n01", "zebra") and catalog.label_of == {"ant": 1, "n01": 2, "zebra": 3}
    assert catalog.texts == {"ant": "ant", "n01": "n01", "zebra": "zebra"}
    assert (catalog.labels_file, catalog.metadata_file) == (f"{root} (class folders)", "")
    metadata = written(tmp_path / "m.txt", "n01\ttench\nother\tnot here\n")
    named = catalog_from_folders(root, metadata)
    assert named.texts == {"ant": "ant", "n01": "tench", "zebra": "zebra"} and named.metadata_file == str(metadata)


def test_a_root_without_class_folders_is_named(tmp_path):
    (tmp_path / "empty" / ".hidden").mkdir(parents=True)
    assert refusal(catalog_from_folders, tmp_path / "empty") == f"{tmp_path / 'empty'}: holds no class folders"
    assert refusal(catalog_from_folders, tmp_path / "none") == f"{tmp_path / 'none'}: folder not found"
    file = written(tmp_path / "file", "x")
    assert refusal(catalog_from_folders, file) == f"{file}: is a file, expected a folder of class folders"


@pytest.mark.parametrize("name", sorted(SUBSET_TRAIN_IMAGES))
def test_a_shipped_subset_is_named_by_its_name(name):
    label, names = read_subset(name)
    assert label == name and len(names) == SUBSET_TRAIN_IMAGES[name]
    assert all(n.endswith(".JPEG") and "/" not in n for n in names)


def test_a_subset_file_lists_image_names_and_is_called_by_its_path(tmp_path, monkeypatch):
    path = written(tmp_path / "mine.txt", "a.JPEG\n\n  b.JPEG \n")
    assert read_subset(path) == (str(path), frozenset({"a.JPEG", "b.JPEG"}))
    monkeypatch.chdir(tmp_path)
    written(tmp_path / "plain", "c.JPEG\n")  # a file named like a list: read as the file it is
    assert read_subset("plain") == ("plain", frozenset({"c.JPEG"}))


@pytest.mark.parametrize("text,problem", [
    ("a.JPEG\nn01/b.JPEG\n", "line 2: expected one image file name per line, got 'n01/b.JPEG'"),
    ("\na.JPEG b.JPEG\n", "line 2: expected one image file name per line, got 'a.JPEG b.JPEG'"),
    ("\n \n", "lists no image names"),
])
def test_a_subset_file_with_a_wrong_line_is_refused(tmp_path, text, problem):
    path = written(tmp_path / "mine.txt", text)
    assert refusal(read_subset, path) == f"{path}: {problem}"


@pytest.mark.parametrize("given,error,message", [
    ("imagenet-2pct", UsageError,
     "--subset imagenet-2pct: no such file, and not a shipped list (imagenet-10pct, imagenet-1pct)"),
    ("mine.txt", InputError, "mine.txt: file not found"),
    (f"lists{os.sep}mine", InputError, f"lists{os.sep}mine: file not found"),
])
def test_a_subset_that_is_neither_a_list_nor_a_file_is_named(tmp_path, monkeypatch, given, error, message):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(error) as refused:
        read_subset(given)
    assert str(refused.value) == message and type(refused.value) is error


def test_the_validation_labels_are_one_synset_per_image_in_order(tmp_path):
    shipped = read_validation_labels()
    assert len(shipped) == 50000 and shipped[:3] == ["n01751748", "n09193705", "n02105855"]
    assert read_validation_labels(written(tmp_path / "v.txt", "n02\nn01\n")) == ["n02", "n01"]
    path = written(tmp_path / "wrong.txt", "n02\nn01 n03\n")
    assert refusal(read_validation_labels, path) == f"{path}: line 2: expected one synset per line, got 'n01 n03'"
