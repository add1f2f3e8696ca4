from runmax import running_max


def test_positive():
    assert running_max([3, 1, 4]) == [3, 3, 4]


def test_empty():
    assert running_max([]) == []
