def running_max(xs):
    """Running maximum: [3, 1, 4] -> [3, 3, 4]. Negative numbers work too."""
    out, best = [], 0
    for x in xs:
        best = max(best, x)
        out.append(best)
    return out
