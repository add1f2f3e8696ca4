from rng import count_in_range, in_range


def test_inside():
    assert in_range(5, 0, 10)


def test_below():
    assert not in_range(-1, 0, 10)


def test_count_inside():
    assert count_in_range([1, 2, 3], 0, 100) == 3
