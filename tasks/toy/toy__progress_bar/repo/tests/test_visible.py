from bar import percent_label


def test_label():
    assert percent_label(1, 4) == "25%"
