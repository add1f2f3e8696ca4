def unique(xs):
    """Remove duplicates, keeping the first occurrence of each item, in order."""
    return list(set(xs))
