from ordinal import ordinal


def test_first_few():
    assert [ordinal(n) for n in (1, 2, 3, 4)] == ["1st", "2nd", "3rd", "4th"]


def test_teens():
    assert ordinal(11) == "11th"
    assert ordinal(12) == "12th"


def test_twenties():
    assert ordinal(22) == "22nd"
