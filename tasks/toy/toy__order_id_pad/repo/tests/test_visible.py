from ids import parse_order_id


def test_parse():
    assert parse_order_id("ORD-000042") == 42
