from geo import distance, manhattan


def test_same_point():
    assert distance(0, 0) == 0
    assert manhattan((0, 0), (0, 0)) == 0
