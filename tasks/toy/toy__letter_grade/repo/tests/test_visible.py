from grades import letter


def test_letters():
    assert [letter(s) for s in (95, 85, 72, 10)] == ["A", "B", "C", "F"]


def test_lower_boundaries():
    assert letter(80) == "B"
    assert letter(70) == "C"
