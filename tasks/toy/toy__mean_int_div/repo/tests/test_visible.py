import pytest

from stats import mean, spread


def test_even_mean():
    assert mean([2, 4]) == 3


def test_spread():
    assert spread([3, 9, 1]) == 8


def test_empty():
    with pytest.raises(ValueError):
        mean([])
