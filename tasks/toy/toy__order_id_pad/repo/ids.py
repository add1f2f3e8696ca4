def order_id(n):
    """'ORD-' plus the number zero-padded to 6 digits: order_id(42) -> 'ORD-000042'."""
    return f"ORD-{n:05d}"


def parse_order_id(text):
    return int(text.removeprefix("ORD-"))
