from stock import stock_after


def test_normal_sale():
    assert stock_after(5, 3) == 2


def test_no_sale():
    assert stock_after(10, 0) == 10
