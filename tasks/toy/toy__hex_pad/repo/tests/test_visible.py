from color import rgb_hex


def test_white():
    assert rgb_hex(255, 255, 255) == "#ffffff"


def test_two_digit_channels():
    assert rgb_hex(16, 32, 48) == "#102030"
