def is_palindrome(s):
    """True if s reads the same backwards, ignoring case and anything not alphanumeric."""
    cleaned = [c for c in s if c.isalnum()]
    return cleaned == cleaned[::-1]
