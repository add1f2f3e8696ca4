class Bucket:
    """Rate limiter: at most `rate` calls are allowed per tick."""

    def __init__(self, rate):
        self.rate = rate
        self.tokens = rate
        self.tick = 0

    def allow(self, now):
        if now != self.tick:
            self.tick = now
            self.tokens += self.rate
        if self.tokens > 0:
            self.tokens -= 1
            return True
        return False
