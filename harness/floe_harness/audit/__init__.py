"""The data audit: plausible wrong patches for a task (``candidates``), whether one behaves
differently from the gold patch (``diffcheck``, a standalone script run in the task's
container), and stronger tests written from the gold patch's behaviour (``strengthen``)."""
