UNITS = {"s": 1, "m": 60, "h": 3600}


def parse_duration(text):
    """Parse '90s', '5m', '2h' or '1d' into a number of seconds."""
    text = text.strip()
    unit = text[-1]
    if unit not in UNITS:
        raise ValueError(f"unknown unit in {text!r}")
    return int(text[:-1]) * UNITS[unit]
