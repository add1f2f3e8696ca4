def parse_port(value):
    """Port from config: an int or a numeric string (spaces allowed), in 1..65535."""
    port = value
    if not 1 <= port <= 65535:
        raise ValueError(f"port out of range: {port}")
    return port
