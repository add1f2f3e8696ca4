from cache import TTLCache


def test_fresh_entry():
    c = TTLCache(5)
    c.set("a", 1, now=0)
    assert c.get("a", now=3) == 1


def test_missing_key_default():
    assert TTLCache(5).get("b", now=0, default=9) == 9


def test_long_expired():
    c = TTLCache(5)
    c.set("a", 1, now=0)
    assert c.get("a", now=10) is None
