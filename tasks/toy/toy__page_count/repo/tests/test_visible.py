import pytest

from pages import page_count, page_slice


def test_exact_pages():
    assert page_count(10, 5) == 2


def test_slice_second_page():
    assert page_slice(list(range(7)), 2, 3) == [3, 4, 5]


def test_rejects_zero_per_page():
    with pytest.raises(ValueError):
        page_count(10, 0)
