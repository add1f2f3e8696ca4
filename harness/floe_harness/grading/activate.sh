# The task image's environment, activated as its dataset's eval script activates it: SWE-bench
# family images keep a conda env `testbed` (`source /opt/miniconda3/bin/activate; conda
# activate testbed`, as swebench's make_eval_script_list_py writes it); R2E-Gym images keep a
# virtualenv in the repository (.venv). floe's own image has neither. Sourced from the
# repository's directory, by the agent's shell (activities/sandbox/command.ts) and by the
# pytest runner (floe_harness/grading/pytest_runner.py).
if [ -f /opt/miniconda3/bin/activate ]; then
  source /opt/miniconda3/bin/activate && conda activate testbed
elif [ -f ./.venv/bin/activate ]; then
  source ./.venv/bin/activate
fi
