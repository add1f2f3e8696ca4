from units import human_bytes


def test_bytes():
    assert human_bytes(512) == "512 B"


def test_kib():
    assert human_bytes(1536) == "1.5 KiB"


def test_gib():
    assert human_bytes(3 * 1024 ** 3) == "3.0 GiB"
