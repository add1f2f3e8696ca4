from cipher import shift


def test_shift_one():
    assert shift("a b", 1) == "b c"


def test_other_chars():
    assert shift("Hi!", 0) == "Hi!"
