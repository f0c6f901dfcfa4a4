"""The workshop checks of notebook 04 (04_tool_env.ipynb): one check per part the learner writes.

Each check runs the part on real cases and returns a one-line message, or raises ExerciseError with
one sentence naming the part, an example input and what was expected (see course_lib/exercises.py).
"""

WORKSHOP = {}  # part -> (the notebook whose solution block defines it, its check); names unique across notebooks
