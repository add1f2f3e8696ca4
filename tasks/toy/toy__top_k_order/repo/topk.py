from collections import Counter


def top_k(words, k):
    """The k most common words, most common first; ties broken alphabetically."""
    counts = Counter(words)
    return sorted(counts, key=lambda w: (counts[w], w))[:k]
