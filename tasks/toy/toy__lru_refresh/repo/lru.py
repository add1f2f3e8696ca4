from collections import OrderedDict


class LRU:
    """Least-recently-used cache holding at most `cap` entries."""

    def __init__(self, cap):
        self.cap = cap
        self.d = OrderedDict()

    def get(self, k, default=None):
        if k not in self.d:
            return default
        self.d.move_to_end(k, last=False)
        return self.d[k]

    def put(self, k, v):
        self.d[k] = v
        self.d.move_to_end(k)
        if len(self.d) > self.cap:
            self.d.popitem(last=False)
