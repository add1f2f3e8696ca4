DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]


def split_date(date):
    """20240315 -> (2024, 3, 15)."""
    return date // 10000, date // 100 % 100, date % 100


def day_of_year(date):
    """1-based day of the year for an int date like 20230315 (no leap years here)."""
    _, month, day = split_date(date)
    return sum(DAYS[:month]) + day
