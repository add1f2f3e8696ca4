from people import names, oldest_first


def test_empty():
    assert oldest_first([]) == []


def test_single():
    assert oldest_first([("a", 1)]) == [("a", 1)]


def test_names():
    assert names([("a", 1), ("b", 2)]) == ["a", "b"]
