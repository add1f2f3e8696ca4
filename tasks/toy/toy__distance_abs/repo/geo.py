def distance(a, b):
    """Absolute distance between two numbers on a line."""
    return abs(a + b)


def manhattan(p, q):
    """Manhattan distance between 2D points p and q."""
    return distance(p[0], q[0]) + distance(p[1], q[1])
