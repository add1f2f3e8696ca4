def pct_change(old, new):
    """Percent change from old to new: 50 -> 75 is 50.0, 100 -> 50 is -50.0."""
    if old == 0:
        raise ValueError("old value is zero")
    return (new - old) / new * 100
