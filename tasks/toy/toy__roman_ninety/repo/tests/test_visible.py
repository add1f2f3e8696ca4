import pytest

from roman import to_roman


def test_small():
    assert to_roman(4) == "IV"
    assert to_roman(40) == "XL"


def test_year():
    assert to_roman(1987) == "MCMLXXXVII"


def test_zero():
    with pytest.raises(ValueError):
        to_roman(0)
