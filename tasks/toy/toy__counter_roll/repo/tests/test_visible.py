from rc import RateCounter


def test_first_window():
    c = RateCounter()
    c.hit(3)
    assert c.roll() == 3
    assert c.history == [3]
