from pal import is_palindrome


def test_simple():
    assert is_palindrome("abba")


def test_not():
    assert not is_palindrome("abc")


def test_punctuation_ignored():
    assert is_palindrome("a b a!")
