"""R2E-Gym rows, graded as R2E-Gym grades them.

Sources (github.com/R2E-Gym/R2E-Gym; 69bc953 is the repository's snapshot, eaa9f6c the newest
stored version of agenthub/runtime/docker.py):

- The image (repo_analysis/base_dockerfiles/Dockerfile.<repo>, repo_analysis/repo_testextract.py):
  the repository at /testbed, checked out at the parent of the fix; run_tests.sh (one line, the
  test command of repo_analysis_args.RepoAnalysisArgs.tests_cmd) at /testbed/run_tests.sh; a venv
  at /testbed/.venv (install_utils/<repo>_install.sh); the hidden tests at /r2e_tests (the fix
  commit's versions of the edited test files as test_1.py, test_2.py, ..., an empty __init__.py,
  sometimes a conftest.py / helper / unittest runner). Nothing of the grading is in the row but
  expected_output_json.
- The episode's setup (agenthub/runtime/docker.py DockerRuntime.setup_env): /root/.venv ->
  /testbed/.venv, the venv's executables linked into /root/.local/bin, `uv pip install chardet`,
  *.pyc and __pycache__ deleted under /testbed and /r2e_tests, run_tests.sh and r2e_tests moved
  from /testbed to /root (SKIP_FILES_NEW), /r2e_tests moved to /root/r2e_tests and linked at
  /testbed/r2e_tests.
- The test run (DockerRuntime.run_tests / run): `timeout 300 bash /root/run_tests.sh` through
  /bin/sh -c, working directory /testbed, PATH=DOCKER_PATH, stdout and stderr together; on exit
  124 the output is replaced by "The command took too long to execute (>300s)"; ANSI colour
  codes and \\r are removed.
- The parser (repo_analysis/execution_log_parser.py parse_log_fn): parse_log_pytest for every one
  of R2E-Gym's repositories (any other name raises there): only the text after "short test
  summary info"; a line containing PASSED / FAILED / ERROR (checked in that order) gives the
  status; the name is the node id without its file (".".join(line.split("::")[1:])), cut at
  " - " for FAILED and ERROR.
- The reward (DockerRuntime._calculate_reward_r2e, eaa9f6c): both maps decoloured
  (decolor_dict_keys) and their keys cut at " - " (in sorted key order, a later key winning);
  reward 1 iff the maps have the same length and every non-empty observed key is expected with
  the same status. Expected statuses are whatever the fix commit produced: PASSED, and also
  FAILED / ERROR for tests that fail at the fix too; those must fail again. (69bc953 had no
  `if not k` / `k not in expected` checks: a key missing from the expected map raised KeyError,
  i.e. no reward; eaa9f6c makes it 0. The one behavioural change is an empty observed key, from
  an ERROR line without "::", which eaa9f6c skips.)

floe's grader runs in a fresh container of the image, not in the agent's, as uid 1000 on a
read-only root file system, with the repository at ``repo_dir``. The script below does what
setup_env and run_tests do, minus what needs root or the network (the /root links, `uv pip
install chardet`): it copies the image's hidden tests into ``repo_dir``/r2e_tests, puts the
venv first on PATH, and runs the image's run_tests.sh from ``repo_dir``.
"""
from __future__ import annotations

import re
import shlex
from typing import Any

HARNESS = "r2e-gym"
PARSER = "parse_log_pytest"

#: agenthub/__init__.py SUPPORTED_REPOS; all of them use parse_log_pytest
R2E_REPOS = ("sympy", "pandas", "pillow", "numpy", "tornado", "coveragepy", "aiohttp", "pyramid", "datalad", "scrapy", "orange3")

#: agenthub/runtime/docker.py
DOCKER_PATH = "/root/.venv/bin:/root/.local/bin:/root/.cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
REPO_PATH = "/testbed"
ALT_PATH = "/root"
HIDDEN_TESTS = "/r2e_tests"
#: run_tests(timeout=300) / runagent(max_reward_calc_time=300)
TEST_TIMEOUT_S = 300
#: what DockerRuntime.run returns instead of the output when `timeout` kills the run (exit 124)
TIMEOUT_OUTPUT = f"The command took too long to execute (>{TEST_TIMEOUT_S}s)"

SUMMARY = "short test summary info"
STATUSES = ("PASSED", "FAILED", "ERROR")

#: DockerRuntime.run / run_tests: r"\x1b\[[0-9;]*m|\r"
_ANSI_LOG = re.compile(r"\x1b\[[0-9;]*m|\r")
#: execution_log_parser.decolor_dict_keys: r"\u001b\[\d+m" (re reads \u001b as ESC)
_ANSI_KEY = re.compile(r"\u001b\[\d+m")


# ------------------------------------------------------------------------- R2E-Gym's rules

def strip_ansi(output: str) -> str:
    """What DockerRuntime.run_tests does to the output before it is parsed."""
    return _ANSI_LOG.sub("", output)


def parse_log_pytest(log: str | None) -> dict[str, str]:
    """execution_log_parser.parse_log_pytest, line for line."""
    if log is None:
        return {}
    test_status_map: dict[str, str] = {}
    if SUMMARY not in log:
        return test_status_map
    lines = log.split(SUMMARY)[1].strip().split("\n")
    for line in lines:
        if "PASSED" in line:
            test_status_map[".".join(line.split("::")[1:])] = "PASSED"
        elif "FAILED" in line:
            test_status_map[".".join(line.split("::")[1:]).split(" - ")[0]] = "FAILED"
        elif "ERROR" in line:
            test_status_map[".".join(line.split("::")[1:]).split(" - ")[0]] = "ERROR"
    return test_status_map


def decolor_dict_keys(d: dict[str, Any]) -> dict[str, Any]:
    """execution_log_parser.decolor_dict_keys."""
    return {_ANSI_KEY.sub("", k): v for k, v in d.items()}


def normalize(d: dict[str, Any]) -> dict[str, Any]:
    """The keys _calculate_reward_r2e compares: decoloured, cut at " - ", in sorted order."""
    d = decolor_dict_keys(d)
    return {k.split(" - ")[0]: d[k] for k in sorted(d.keys())}


def reward(parsed: dict[str, str], expected: dict[str, str]) -> float:
    """DockerRuntime._calculate_reward_r2e (eaa9f6c) on an already parsed log: 1.0 or 0.0."""
    parse = normalize(parsed)
    exp = normalize(expected)
    if len(parse) != len(exp):
        return 0.0
    for k in parse.keys():
        if not k:
            continue
        if k not in exp:
            return 0.0
        if parse[k] != exp[k]:
            return 0.0
    return 1.0


# ---------------------------------------------------------------------------- floe's side

def expected_outputs(task: dict[str, Any]) -> dict[str, str]:
    """The task's expected_output_json, as a map (floe's task field ``expectedOutputs``)."""
    exp = task.get("expectedOutputs")
    if not isinstance(exp, dict):
        raise ValueError("R2E-Gym task without expectedOutputs (the row's expected_output_json as a map of test name to status)")
    for k, v in exp.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise ValueError(f"expectedOutputs: {k!r}: {v!r} is not a test name mapped to a status string")
    return exp


def plan(task: dict[str, Any], repo_dir: str) -> dict[str, Any]:
    """The script that runs the hidden tests as R2E-Gym runs them, from the repository at
    ``repo_dir``, in a fresh container of the task's image; the test output goes to stdout.

    Exit 0 when run_tests.sh ran (whatever its own exit status), 12 when the image lacks what
    the run needs (hidden tests, run_tests.sh, the venv)."""
    expected_outputs(task)
    run_tests = task.get("runTestsSh")
    if run_tests is not None and not isinstance(run_tests, str):
        raise ValueError("runTestsSh, when given, is the text of the image's /testbed/run_tests.sh")
    q = shlex.quote
    repo = repo_dir.rstrip("/") or "/"
    venv_path = DOCKER_PATH.replace(f"{ALT_PATH}/.venv/bin", '"$venv/bin"')
    if run_tests is None:
        # the image's copy: where setup_env moved it, else where the Dockerfile put it; the
        # repository's copy only when /testbed is not readable (it comes from the same image)
        find_run_tests = "\n".join([
            'rt=""',
            f'for f in {ALT_PATH}/run_tests.sh {REPO_PATH}/run_tests.sh "$repo/run_tests.sh"; do',
            '  if [ -f "$f" ] && [ -r "$f" ]; then rt=$f; break; fi',
            "done",
            'if [ -z "$rt" ]; then echo "floe r2e: the image has no readable run_tests.sh (looked in /root, /testbed and $repo)"; exit 12; fi',
        ])
    else:
        find_run_tests = "\n".join([
            'rt=$(mktemp /tmp/floe-r2e-run_tests.XXXXXX)',
            f"printf '%s' {q(run_tests)} > \"$rt\"",
        ])
    script = f"""#!/bin/bash
# R2E-Gym's test run (agenthub/runtime/docker.py: setup_env, run_tests, _calculate_reward_r2e),
# from the repository at {repo} in a fresh container of the task's image.
set -u
repo={q(repo)}
cd "$repo" || {{ echo "floe r2e: no repository at $repo"; exit 12; }}

# the hidden tests: in the image at {HIDDEN_TESTS} (or {ALT_PATH}/r2e_tests once setup_env moved
# them), linked at /testbed/r2e_tests by R2E-Gym; copied here, over anything the agent left
src=""
for d in {HIDDEN_TESTS} {ALT_PATH}/r2e_tests; do
  if [ -d "$d" ] && [ -r "$d" ]; then src=$d; break; fi
done
if [ -z "$src" ]; then echo "floe r2e: the image's hidden tests are not readable ({HIDDEN_TESTS}, {ALT_PATH}/r2e_tests)"; exit 12; fi
if [ "$(cd "$src" && pwd -P)" != "$(pwd -P)/r2e_tests" ]; then
  rm -rf r2e_tests
  cp -R "$src" r2e_tests || {{ echo "floe r2e: copying $src into $repo failed"; exit 12; }}
fi

{find_run_tests}

# the venv: /testbed/.venv in the image; run_tests.sh calls .venv/bin/python from here
if [ ! -e .venv ] && [ "$repo" != {REPO_PATH} ] && [ -d {REPO_PATH}/.venv ]; then ln -s {REPO_PATH}/.venv .venv; fi
if [ -d .venv ]; then venv="$repo/.venv"; else venv={REPO_PATH}/.venv; fi
if [ ! -x .venv/bin/python ]; then echo "floe r2e: no venv (.venv/bin/python) in $repo or {REPO_PATH}"; exit 12; fi

# setup_env: no stale byte code, here and in the hidden tests
find . -name '*.pyc' -delete 2>/dev/null
find . -name '__pycache__' -exec rm -rf {{}} + 2>/dev/null

# run_tests: `timeout {TEST_TIMEOUT_S} bash /root/run_tests.sh` from /testbed, PATH=DOCKER_PATH
# with /root/.venv -> the venv, stdout and stderr together
export VIRTUAL_ENV="$venv"
export PATH={venv_path}
timeout {TEST_TIMEOUT_S} bash "$rt" 2>&1
rc=$?
if [ "$rc" = 124 ]; then echo; echo {q(TIMEOUT_OUTPUT)}; fi
exit 0
"""
    return {
        "harness": HARNESS,
        "script": script,
        "parser": PARSER,
        "testCommand": (run_tests if run_tests is not None else f"bash {REPO_PATH}/run_tests.sh"),
    }


def _outcome(name: str, want: str, observed: dict[str, str]) -> str:
    got = observed.get(name)
    if got is None:
        return "missing"
    if got == want:
        return "passed"
    return "error" if got == "ERROR" else "failed"


def parse(task: dict[str, Any], log: str) -> dict[str, Any]:
    """Read the output of plan()'s script as R2E-Gym reads run_tests.sh's output.

    statuses: the observed map as the reward compares it (decoloured, cut at " - ").
    tests: every expected test; outcome "passed" when its observed status is the expected one
    (also for a test expected to fail), else "missing" / "error" / "failed" by what was seen.
    group: FAIL_TO_PASS for the names in the task's failToPass (tests whose status at the fix
    differs from the one at base), else PASS_TO_PASS.
    resolved: R2E-Gym's reward is 1."""
    expected = expected_outputs(task)
    text = strip_ansi(log)
    timed_out = any(line.strip() == TIMEOUT_OUTPUT for line in text.split("\n"))
    # on a timeout R2E-Gym parses its replacement text: nothing
    parsed = {} if timed_out else parse_log_pytest(text)
    statuses = normalize(parsed)
    exp = normalize(expected)
    f2p = set(task.get("failToPass") or [])
    tests = [
        {"id": name, "group": "FAIL_TO_PASS" if name in f2p else "PASS_TO_PASS", "outcome": _outcome(name, want, statuses)}
        for name, want in exp.items()
    ]
    return {
        "statuses": statuses,
        "tests": tests,
        "resolved": reward(parsed, expected) == 1.0,
        "logComplete": (not timed_out) and SUMMARY in text,
    }
