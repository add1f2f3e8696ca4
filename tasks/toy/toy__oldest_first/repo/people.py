def oldest_first(people):
    """Sort (name, age) pairs oldest first; people of equal age keep their input order."""
    return sorted(people, key=lambda p: p[1])


def names(people):
    return [name for name, _ in people]
