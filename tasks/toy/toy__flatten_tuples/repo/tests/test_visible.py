from flat import flatten


def test_nested_lists():
    assert flatten([1, [2, [3]]]) == [1, 2, 3]


def test_empty():
    assert flatten([]) == []


def test_strings_whole():
    assert flatten(["ab", ["cd"]]) == ["ab", "cd"]
