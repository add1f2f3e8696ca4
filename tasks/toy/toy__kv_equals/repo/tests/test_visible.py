from kv import parse_kv


def test_pairs():
    assert parse_kv("a=1;b=2") == {"a": "1", "b": "2"}


def test_trailing_separator():
    assert parse_kv("a=1;") == {"a": "1"}


def test_spaces():
    assert parse_kv(" x = y ") == {"x": "y"}
