from tags import parse_tags


def test_compact():
    assert parse_tags("a,b") == ["a", "b"]


def test_empty():
    assert parse_tags("") == []


def test_empty_tag_dropped():
    assert parse_tags("a,,b") == ["a", "b"]
