import json


def load_settings(path, defaults=None):
    """Load JSON settings; a missing file gives a copy of `defaults` (or {}).

    A file that exists but is not valid JSON is an error.
    """
    try:
        with open(path) as f:
            return json.load(f)
    except FileExistsError:
        return dict(defaults or {})
