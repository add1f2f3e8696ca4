from topk import top_k


def test_empty():
    assert top_k([], 3) == []


def test_single():
    assert top_k(["a"], 1) == ["a"]


def test_tie_alphabetical():
    assert top_k(["b", "a"], 2) == ["a", "b"]
