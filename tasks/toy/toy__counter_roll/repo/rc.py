class RateCounter:
    """Counts events in the current window; roll() closes it and starts a new one."""

    def __init__(self):
        self.count = 0
        self.history = []

    def hit(self, n=1):
        self.count += n

    def roll(self):
        """Record and return the finished window's count; the new window starts at 0."""
        done, self.count = self.count, self.count
        self.history.append(done)
        return done
