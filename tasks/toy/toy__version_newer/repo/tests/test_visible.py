from ver import key, newer


def test_key():
    assert key("1.10.2") == (1, 10, 2)


def test_simple_newer():
    assert newer("1.2", "1.1")


def test_equal_not_newer():
    assert not newer("1.0", "1.0")
