from plural import plural


def test_singular():
    assert plural("apple", 1) == "1 apple"


def test_plain_plural():
    assert plural("apple", 2) == "2 apples"


def test_x():
    assert plural("box", 3) == "3 boxes"
