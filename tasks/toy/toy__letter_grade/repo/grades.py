def letter(score):
    """Letter for a (possibly fractional) score: 90 and above 'A', 80+ 'B', 70+ 'C', else 'F'."""
    if score > 90:
        return "A"
    if score >= 80:
        return "B"
    if score >= 70:
        return "C"
    return "F"
