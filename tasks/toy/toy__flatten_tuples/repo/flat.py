def flatten(xs):
    """Flatten nested lists and tuples into one flat list; strings are kept whole."""
    out = []
    for x in xs:
        if isinstance(x, list):
            out.extend(flatten(x))
        else:
            out.append(x)
    return out
