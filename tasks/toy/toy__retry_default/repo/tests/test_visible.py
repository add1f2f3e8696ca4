import pytest

from retry import retry


def test_success_first_try():
    assert retry(lambda: 5, attempts=1) == 5


def test_reraises_last_error():
    def boom():
        raise OSError("down")

    with pytest.raises(OSError):
        retry(boom, attempts=2)
