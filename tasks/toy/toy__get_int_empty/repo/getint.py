def get_int(env, name, default=None):
    """Integer setting from an env dict; unset or empty values give `default`."""
    raw = env.get(name, "")
    if raw is None:
        return default
    return int(raw)
