def display_name(first, last):
    """Both names capitalised: ('ada', 'LOVELACE') -> 'Ada Lovelace'."""
    return f"{first.capitalize()} {last}"


def initials(first, last):
    return f"{first[:1]}{last[:1]}".upper()
