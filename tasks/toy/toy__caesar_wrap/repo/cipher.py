def shift(text, k):
    """Caesar-shift the letters a-z by k places, wrapping around; other chars unchanged."""
    out = []
    for ch in text:
        if "a" <= ch <= "z":
            out.append(chr((ord(ch) - 97 + k) % 25 + 97))
        else:
            out.append(ch)
    return "".join(out)
