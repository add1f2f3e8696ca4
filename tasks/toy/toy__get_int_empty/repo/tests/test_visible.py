from getint import get_int


def test_value():
    assert get_int({"X": "3"}, "X") == 3


def test_spaces():
    assert get_int({"X": " 7 "}, "X") == 7
