def plural(word, n):
    """'1 apple', '2 apples', '3 boxes': add 'es' after s, x, z, ch and sh."""
    if n == 1:
        return f"{n} {word}"
    suffix = "es" if word.endswith(("s", "x", "z")) else "s"
    return f"{n} {word}{suffix}"
