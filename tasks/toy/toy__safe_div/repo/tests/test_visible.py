from calc import safe_div


def test_divides():
    assert safe_div(6, 3) == 2


def test_fraction():
    assert safe_div(1, 4) == 0.25
