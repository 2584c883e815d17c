"""The registries' one rule (infra/unique_names.py): an entry under its name once; a second of the same name refused,
the first kept."""

import pytest

from imagenet_build.infra.unique_names import add_once


def test_an_entry_is_added_once_and_a_second_of_its_name_is_refused():
    table: dict = {}
    first = object()
    assert add_once(table, "one", first, "widget") is first and table == {"one": first}
    with pytest.raises(ValueError) as refused:
        add_once(table, "one", object(), "widget")
    assert str(refused.value) == "widget 'one' registered twice" and table == {"one": first}
    assert add_once(table, "two", 2, "widget") == 2 and table == {"one": first, "two": 2}
