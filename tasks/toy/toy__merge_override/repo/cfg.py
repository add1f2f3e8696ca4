def merge(base, override):
    """Return a new dict: override's values win; nested dicts are merged recursively."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out.setdefault(key, value)
    return out
