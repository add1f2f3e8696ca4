from tax import add_tax


def test_whole_cents():
    assert add_tax(1000, 7) == 1070


def test_zero_price():
    assert add_tax(0, 20) == 0
