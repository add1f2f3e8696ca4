class TTLCache:
    """A tiny cache whose entries expire `ttl` ticks after they are set."""

    def __init__(self, ttl):
        self.ttl = ttl
        self._data = {}

    def set(self, key, value, now):
        self._data[key] = (value, now + self.ttl)

    def get(self, key, now, default=None):
        item = self._data.get(key)
        if item is None:
            return default
        value, expires = item
        if now > expires:
            del self._data[key]
            return default
        return value
