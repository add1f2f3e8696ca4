from cfg import merge


def test_disjoint_keys():
    assert merge({"a": 1}, {"b": 2}) == {"a": 1, "b": 2}


def test_nested_new_key():
    assert merge({"db": {"host": "x"}}, {"db": {"port": 1}}) == {"db": {"host": "x", "port": 1}}


def test_base_not_mutated():
    base = {"a": 1}
    merge(base, {"b": 2})
    assert base == {"a": 1}
