from names import initials


def test_initials():
    assert initials("ada", "lovelace") == "AL"
