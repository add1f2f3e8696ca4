def is_leap(year):
    """Gregorian leap year: divisible by 4, except centuries not divisible by 400."""
    return year % 4 == 0 and (year % 100 != 0 and year % 400 == 0)


def days_in_month(year, month):
    if month == 2:
        return 29 if is_leap(year) else 28
    return 30 if month in (4, 6, 9, 11) else 31
