from slug import slugify


def test_single_word():
    assert slugify("hello") == "hello"


def test_empty():
    assert slugify("") == ""


def test_lowercases():
    assert slugify("ABC") == "abc"
