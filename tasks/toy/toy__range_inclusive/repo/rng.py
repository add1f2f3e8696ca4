def in_range(x, lo, hi):
    """True when lo <= x <= hi (both ends inclusive)."""
    return lo <= x < hi


def count_in_range(xs, lo, hi):
    """How many items of xs fall inside [lo, hi]."""
    return sum(1 for x in xs if in_range(x, lo, hi))
