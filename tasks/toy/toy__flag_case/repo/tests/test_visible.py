from flags import env_flag


def test_one_is_true():
    assert env_flag({"X": "1"}, "X") is True


def test_unset_default():
    assert env_flag({}, "X") is False
    assert env_flag({}, "X", default=True) is True


def test_no_is_false():
    assert env_flag({"X": "no"}, "X") is False
