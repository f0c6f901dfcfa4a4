"""Import check for the GPU machine (run by .gpu/check.sh; also runnable on its own from the repo root).

Imports the course modules the GRPO measurement needs and builds the tic-tac-toe training
environment, so a missing wheel shows up here, before any measurement starts.
"""

import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The course installs each folder of course_lib/envs as a top-level package (pyproject.toml);
# on the device nothing is installed, so put the repo root and course_lib/envs on the path.
for path in (os.path.join(ROOT, "course_lib", "envs"), ROOT):
    if path not in sys.path:
        sys.path.insert(0, path)

start = time.perf_counter()
import course_lib.evaluation  # noqa: E402,F401
import course_lib.grpo  # noqa: E402,F401
import course_lib.local_model  # noqa: E402,F401
import course_lib.profiles  # noqa: E402,F401
import course_lib.rollout_bridge  # noqa: E402,F401
from course_lib import grpo  # noqa: E402
from course_lib.profiles import get_profile  # noqa: E402

print(f"course_lib imports: OK ({time.perf_counter() - start:.1f} s)")

env = grpo.training_environment(get_profile("cpu"))
print(f"tic-tac-toe training environment: {type(env).__name__}, {len(env.get_dataset())} rows")
