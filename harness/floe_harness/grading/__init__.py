"""Grading: which harness grades a task (``harness``), the script it runs in the task's container
and how its log is read, per harness (``swebench_rules``, ``r2e``, ``pytest_runner`` with its
plugin ``floe_pytest_report``), and the line protocol of the long-lived process (``serve``).
Nothing here imports the data audit."""
