def overlaps(a, b):
    """Do half-open intervals a = (start, end) and b overlap? Touching ends do not."""
    a0, a1 = a
    b0, b1 = b
    return a0 <= b1 and b0 <= a1
