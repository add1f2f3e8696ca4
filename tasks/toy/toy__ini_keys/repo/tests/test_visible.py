from ini import parse_ini


def test_compact():
    assert parse_ini("[a]\nx=1\n# comment") == {"a": {"x": "1"}}


def test_empty():
    assert parse_ini("") == {}
