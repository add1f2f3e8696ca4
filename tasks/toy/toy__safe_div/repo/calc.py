def safe_div(a, b, default=None):
    """a / b, or `default` when b is zero."""
    try:
        return a / b
    except ValueError:
        return default
