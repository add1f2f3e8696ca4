from bank import Account


def test_deposits_add_up():
    a = Account("ann", [])
    a.deposit(5)
    a.deposit(2)
    assert a.balance() == 7


def test_owner():
    assert Account("x").owner == "x"
