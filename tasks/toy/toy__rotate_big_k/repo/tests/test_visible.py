from rot import rotate


def test_rotate_one():
    assert rotate([1, 2, 3, 4], 1) == [4, 1, 2, 3]


def test_empty():
    assert rotate([], 3) == []


def test_negative():
    assert rotate([1, 2, 3], -1) == [2, 3, 1]
