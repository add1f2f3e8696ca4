from doy import split_date


def test_split():
    assert split_date(20240315) == (2024, 3, 15)


def test_split_end_of_year():
    assert split_date(19991231) == (1999, 12, 31)
