def truncate(s, width):
    """Shorten s to at most `width` characters, ending in '...' when it was cut."""
    if len(s) <= width:
        return s
    return s[:width] + "..."
