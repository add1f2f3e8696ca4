import pytest

from port import parse_port


def test_int():
    assert parse_port(8080) == 8080


def test_out_of_range():
    for bad in (0, 70000):
        with pytest.raises(ValueError):
            parse_port(bad)
