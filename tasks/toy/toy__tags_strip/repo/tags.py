def parse_tags(s):
    """'a, b ,c' -> ['a', 'b', 'c']: tags are trimmed and empty ones dropped."""
    return [t for t in map(str, s.split(",")) if t]
