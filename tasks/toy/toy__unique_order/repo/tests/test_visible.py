from uniq import unique


def test_empty():
    assert unique([]) == []


def test_all_same():
    assert unique([1, 1, 1]) == [1]
