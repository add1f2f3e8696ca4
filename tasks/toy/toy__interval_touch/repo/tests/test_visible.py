from span import overlaps


def test_overlap():
    assert overlaps((0, 5), (3, 9))


def test_apart():
    assert not overlaps((0, 2), (3, 4))


def test_contained():
    assert overlaps((3, 4), (0, 9))
