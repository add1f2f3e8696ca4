def add_tax(cents, rate_pct):
    """Price in integer cents plus rate_pct percent tax, rounded half up to a whole cent."""
    return cents + (rate_pct * cents) // 100
