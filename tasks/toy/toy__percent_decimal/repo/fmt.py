def percent(part, whole):
    """Format part/whole as a percentage with one decimal place, e.g. '12.5%'."""
    if whole == 0:
        return "n/a"
    return f"{100 * part / whole:.0f}%"


def ratio(part, whole):
    """part/whole as a float, 0.0 when whole is 0."""
    return part / whole if whole else 0.0
