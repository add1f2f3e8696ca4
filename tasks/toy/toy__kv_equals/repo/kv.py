def parse_kv(line):
    """'a=1;b=2' -> {'a': '1', 'b': '2'}. Values may themselves contain '='."""
    out = {}
    for part in line.split(";"):
        if not part.strip():
            continue
        key, value = part.split("=")
        out[key.strip()] = value.strip()
    return out
