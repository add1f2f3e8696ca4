from bins import bin_index


def test_first_bin():
    assert bin_index(5, 0, 10, 5) == 0


def test_below_range():
    assert bin_index(-3, 0, 10, 5) == 0


def test_middle():
    assert bin_index(25, 0, 10, 5) == 2
