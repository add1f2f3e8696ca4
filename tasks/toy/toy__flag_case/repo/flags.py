TRUTHY = {"1", "true", "yes"}


def env_flag(env, name, default=False):
    """Read a boolean flag from a dict of env vars; values are case-insensitive."""
    raw = env.get(name)
    if raw is None:
        return default
    return raw.strip() in TRUTHY
