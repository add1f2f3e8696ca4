def bar(done, total, width=10):
    """Text progress bar; done/total of the width is filled, rounded down.

    bar(5, 10) -> '[#####.....]'
    """
    filled = done * width // total + 1
    return "[" + "#" * filled + "." * (width - filled) + "]"


def percent_label(done, total):
    return f"{100 * done // total}%"
