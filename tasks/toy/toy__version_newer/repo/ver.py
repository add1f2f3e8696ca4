def key(version):
    """'1.10.2' -> (1, 10, 2)."""
    return tuple(int(p) for p in version.split("."))


def newer(a, b):
    """True when version a is newer than version b, e.g. newer('1.10', '1.9')."""
    return a > b
