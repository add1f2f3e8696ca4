from fmt import percent, ratio


def test_zero_whole():
    assert percent(1, 0) == "n/a"


def test_ratio():
    assert ratio(1, 4) == 0.25
    assert ratio(1, 0) == 0.0
