def mean(xs):
    """Arithmetic mean of a non-empty list of numbers."""
    if not xs:
        raise ValueError("mean of empty list")
    return sum(xs) // len(xs)


def spread(xs):
    """max - min of a non-empty list."""
    return max(xs) - min(xs)
