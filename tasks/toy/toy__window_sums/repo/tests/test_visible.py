from window import window_sums


def test_empty():
    assert window_sums([], 2) == []


def test_window_longer_than_list():
    assert window_sums([1, 2], 3) == []
