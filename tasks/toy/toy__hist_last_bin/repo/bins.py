def bin_index(x, lo, width, nbins):
    """Histogram bin of x; values past either end go into the first/last bin."""
    i = int((x - lo) // width)
    return max(0, min(i, nbins))
