from bucket import Bucket


def test_first_tick():
    b = Bucket(2)
    assert [b.allow(0) for _ in range(3)] == [True, True, False]
