import re


def render(template, values):
    """Fill {name} placeholders from values; unknown placeholders are left as they are."""
    return re.sub(r"\{(\w+)\}", lambda m: str(values.get(m.group(1), "")), template)
