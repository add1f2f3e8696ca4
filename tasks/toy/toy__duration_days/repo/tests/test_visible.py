import pytest

from dur import parse_duration


def test_seconds_minutes_hours():
    assert parse_duration("90s") == 90
    assert parse_duration("5m") == 300
    assert parse_duration("2h") == 7200


def test_unknown_unit():
    with pytest.raises(ValueError):
        parse_duration("3w")
