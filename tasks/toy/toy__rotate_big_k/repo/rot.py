def rotate(xs, k):
    """Rotate xs right by k: [1, 2, 3, 4], 1 -> [4, 1, 2, 3]. k may be negative or > len(xs)."""
    if not xs:
        return []
    k = k % len(xs) if k < 0 else k
    return xs[-k:] + xs[:-k]
