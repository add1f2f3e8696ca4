from text import truncate


def test_short_unchanged():
    assert truncate("abc", 5) == "abc"


def test_exact_fit():
    assert truncate("abcde", 5) == "abcde"
