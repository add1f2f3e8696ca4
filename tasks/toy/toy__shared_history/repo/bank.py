class Account:
    def __init__(self, owner, history=[]):
        self.owner = owner
        self.history = history

    def deposit(self, amount):
        self.history.append(("deposit", amount))

    def balance(self):
        return sum(amount for _, amount in self.history)
