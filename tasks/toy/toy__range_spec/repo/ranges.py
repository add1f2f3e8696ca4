def parse_ranges(spec):
    """Page spec to page numbers: '1-3,5' -> [1, 2, 3, 5]. Ranges are inclusive."""
    out = []
    for part in spec.split(","):
        if "-" in part:
            a, b = part.split("-")
            out.extend(range(int(a), int(b)))
        else:
            out.append(int(part))
    return out
