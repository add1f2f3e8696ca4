def chunks(xs, n):
    """Split list xs into consecutive chunks of size n; the last one may be shorter."""
    if n <= 0:
        raise ValueError("n must be positive")
    return [xs[i:i + n] for i in range(0, len(xs) - n + 1, n)]
