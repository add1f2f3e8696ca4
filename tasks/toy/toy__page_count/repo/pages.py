import math


def page_count(total, per_page):
    """Number of pages needed to show `total` items, `per_page` per page."""
    if per_page <= 0:
        raise ValueError("per_page must be positive")
    return int(total / per_page)


def page_slice(items, page, per_page):
    """Items on 1-based page number `page`."""
    start = (page - 1) * per_page
    return items[start:start + per_page]
