"""floe's bridge to the datasets' own evaluation harnesses, and its data audit.

- ``grading``: how a task's tests are run and read. The harness that grades a task and its
  plan / parse (``grading.harness``); per harness one module: ``swebench_rules`` (SWE-bench,
  SWE-bench Verified, SWE-Gym and SWE-rebench rows whose repository and version the official
  ``swebench`` package (4.1.0) has in its tables), ``r2e`` (R2E-Gym rows, graded from their
  expected outputs as R2E-Gym does), ``pytest_runner`` (everything else that runs pytest, read
  through the ``floe_pytest_report`` plugin rather than pytest's text output); and the line
  protocol of the long-lived process floe's grader talks to (``grading.serve``).
- ``audit``: the data audit, which looks for tasks whose tests accept a wrong patch: plausible
  wrong patches (``candidates``), the differential check run in a task's container
  (``diffcheck``), stronger tests from the gold patch's behaviour (``strengthen``). The audit may
  use grading; grading never imports the audit.

``python -m floe_harness plan|parse|which`` (JSON on stdin, JSON on stdout) and ``python -m
floe_harness serve`` are what floe calls: see cli.py, the one module that knows both.
"""
