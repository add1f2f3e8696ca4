def join_url(base, path):
    """join_url('http://h/api/', '/v1') -> 'http://h/api/v1'."""
    return base.rstrip("/") + path.lstrip("/")


def strip_query(url):
    """Drop the '?query' part of a URL."""
    return url.split("?", 1)[0]
