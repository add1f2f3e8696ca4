def window_sums(xs, k):
    """Sums of every run of k consecutive items: [1, 2, 3, 4], 2 -> [3, 5, 7]."""
    return [sum(xs[i:i + k]) for i in range(len(xs) - k)]
