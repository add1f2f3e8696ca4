from conf import load_settings


def test_reads_file(tmp_path):
    path = tmp_path / "s.json"
    path.write_text('{"a": 1}')
    assert load_settings(path) == {"a": 1}
