def human_bytes(n):
    """1536 -> '1.5 KiB'. 1024-based units, up to GiB."""
    for unit in ["B", "KiB", "MiB"]:
        if n < 1000:
            return f"{n:.1f} {unit}" if unit != "B" else f"{n} B"
        n /= 1024
    return f"{n:.1f} GiB"
