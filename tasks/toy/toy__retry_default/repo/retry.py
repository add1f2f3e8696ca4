def retry(fn, attempts=0, errors=(OSError,)):
    """Call fn until it succeeds, at most `attempts` times (3 by default).

    Errors listed in `errors` are retried; the last one is re-raised.
    """
    last = None
    for _ in range(attempts):
        try:
            return fn()
        except errors as exc:
            last = exc
    raise last
