from shop.cart import Cart


def test_add_accumulates():
    c = Cart()
    c.add("a", 2)
    c.add("a")
    assert c.items == {"a": 3}
    assert c.total() == 3


def test_partial_remove():
    c = Cart()
    c.add("a", 3)
    c.remove("a")
    assert c.items == {"a": 2}
