class Stack:
    def __init__(self):
        self._items = []

    def push(self, x):
        self._items.append(x)

    def pop(self):
        if not self._items:
            raise IndexError("pop from empty stack")
        return self._items.pop()

    def peek(self):
        """The top item (the one pop() returns next), without removing it."""
        return self._items[0]

    def __len__(self):
        return len(self._items)
