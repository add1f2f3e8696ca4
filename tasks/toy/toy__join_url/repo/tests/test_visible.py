from urls import strip_query


def test_strip_query():
    assert strip_query("http://h/a?x=1") == "http://h/a"


def test_no_query():
    assert strip_query("http://h") == "http://h"
