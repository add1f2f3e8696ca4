import pytest

from stack import Stack


def test_push_pop_order():
    s = Stack()
    s.push(1)
    s.push(2)
    assert s.pop() == 2
    assert s.pop() == 1


def test_pop_empty():
    with pytest.raises(IndexError):
        Stack().pop()


def test_len():
    s = Stack()
    s.push("x")
    assert len(s) == 1
