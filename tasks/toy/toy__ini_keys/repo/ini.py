def parse_ini(text):
    """Parse '[section]' headers and 'key = value' lines; '#' lines are comments."""
    data, section = {}, None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            section = line[1:-1]
            data[section] = {}
        else:
            key, _, value = line.partition("=")
            data[section][key] = value.strip()
    return data
