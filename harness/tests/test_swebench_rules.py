"""SWE-bench-family rules come from the swebench package: which rows it covers, the eval script
it makes, and its parser + resolution rule over a Django-format log."""
from floe_harness.grading import harness, swebench_rules

DJANGO = {
    "instanceId": "django__django-90001", "repo": "django/django", "version": "5.0", "layout": "swe-bench",
    "testPatch": "diff --git a/tests/shapes/tests.py b/tests/shapes/tests.py\n--- a/tests/shapes/tests.py\n+++ b/tests/shapes/tests.py\n@@ -1 +1,2 @@\n x = 1\n+y = 2\n",
    "failToPass": ["test_area (shapes.tests.AreaTests.test_area)"],
    "passToPass": ["test_name (shapes.tests.NameTests.test_name)"],
}


def test_covers_only_repositories_in_the_tables():
    assert swebench_rules.covers(DJANGO)
    assert not swebench_rules.covers({**DJANGO, "version": "0.0"})
    assert not swebench_rules.covers({**DJANGO, "repo": "floe-fixtures/colorful"})
    assert harness.harness_for({**DJANGO, "repo": "floe-fixtures/colorful"}) == "pytest"
    assert harness.harness_for({**DJANGO, "layout": "toy"}) == "pytest"


def test_eval_script_is_the_packages_with_the_fresh_commit():
    p = swebench_rules.plan(DJANGO, "abc123", "/testbed")
    s = p["script"]
    assert s.startswith("#!/bin/bash\nset -uxo pipefail\n")
    assert "source /opt/miniconda3/bin/activate" in s and "conda activate testbed" in s
    assert "git checkout abc123 tests/shapes/tests.py" in s
    assert "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 shapes.tests" in s
    assert p["parser"] == "parse_log_django"


def _log(area: str, name: str) -> str:
    return "\n".join([
        "+ git apply -v -", ">>>>> Start Test Output",
        f"test_area (shapes.tests.AreaTests.test_area) ... {area}",
        f"test_name (shapes.tests.NameTests.test_name) ... {name}",
        "Ran 2 tests in 0.001s", ">>>>> End Test Output", "",
    ])


def test_parse_resolves_only_when_every_test_passes():
    ok = swebench_rules.parse(DJANGO, _log("ok", "ok"))
    assert ok["resolved"] and [t["outcome"] for t in ok["tests"]] == ["passed", "passed"]
    broken = swebench_rules.parse(DJANGO, _log("ok", "FAIL"))
    assert not broken["resolved"] and broken["tests"][1]["outcome"] == "failed"
    cut = swebench_rules.parse(DJANGO, _log("ok", "ok").replace(">>>>> End Test Output", ""))
    assert not cut["resolved"]
