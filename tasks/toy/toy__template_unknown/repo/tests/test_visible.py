from tpl import render


def test_fill():
    assert render("hi {name}", {"name": "Ada"}) == "hi Ada"


def test_numbers():
    assert render("{a}{b}", {"a": 1, "b": 2}) == "12"
