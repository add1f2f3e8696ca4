from mail import split_email


def test_plain():
    assert split_email("ada@x.org") == ("ada", "x.org")


def test_domain_lowered():
    assert split_email("bob@EXAMPLE.com") == ("bob", "example.com")
