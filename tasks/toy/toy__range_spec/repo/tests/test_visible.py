from ranges import parse_ranges


def test_single():
    assert parse_ranges("5") == [5]


def test_list():
    assert parse_ranges("1,2") == [1, 2]
