def word_counts(text):
    """Count words case-insensitively; punctuation at word ends is ignored."""
    counts = {}
    for raw in text.split():
        word = raw.strip(".,!?;:")
        if not word:
            continue
        counts[word] = counts.get(word, 0) + 1
    return counts
