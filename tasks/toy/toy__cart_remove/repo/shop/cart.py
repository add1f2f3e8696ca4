class Cart:
    def __init__(self):
        self.items = {}

    def add(self, sku, qty=1):
        self.items[sku] = self.items.get(sku, 0) + qty

    def remove(self, sku, qty=1):
        """Remove qty of sku; the sku is dropped entirely once its count reaches 0."""
        left = self.items.get(sku, 0) - qty
        if left < 0:
            del self.items[sku]
        else:
            self.items[sku] = left

    def total(self):
        return sum(self.items.values())
