def rgb_hex(r, g, b):
    """(255, 0, 128) -> '#ff0080'."""
    return "#" + "".join(f"{c:x}" for c in (r, g, b))
