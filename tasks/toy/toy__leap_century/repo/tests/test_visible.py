from dates import days_in_month, is_leap


def test_common_year():
    assert not is_leap(2023)
    assert days_in_month(2023, 2) == 28


def test_month_lengths():
    assert days_in_month(2023, 4) == 30
    assert days_in_month(2023, 1) == 31
