import pytest

from change import pct_change


def test_no_change():
    assert pct_change(10, 10) == 0.0


def test_zero_old():
    with pytest.raises(ValueError):
        pct_change(0, 5)
