"""floe's bridge to the datasets' own evaluation harnesses.

``python -m floe_harness plan`` and ``python -m floe_harness parse`` (JSON on stdin, JSON on
stdout) are what floe's grader calls: see cli.py. Each harness is one module:

- swebench_rules: SWE-bench, SWE-bench Verified, SWE-Gym and SWE-rebench rows whose repository
  and version the official ``swebench`` package (4.1.0) has in its tables: its eval script,
  its log parser, its resolution rule.
- r2e: R2E-Gym rows, graded from their expected outputs as R2E-Gym does.
- pytest_runner: everything else that runs pytest (floe's toy suite, and rows of repositories
  outside the tables), read through a pytest plugin (floe_pytest_report.py) rather than
  pytest's text output, so colour, verbosity and odd test ids do not matter.
"""
