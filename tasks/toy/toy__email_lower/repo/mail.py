def split_email(addr):
    """'Ada@Example.COM' -> ('ada', 'example.com'): both parts are lower-cased."""
    local, domain = addr.split("@")
    return local, domain.lower()
