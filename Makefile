# Every target that needs Python depends on the venv stamp, so a fresh clone needs
# nothing but `make lab` or `make test`.
SYSTEM_PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
PY := $(BIN)/python
STAMP := $(VENV)/.installed
LAB_ARGS ?=
# Jupyter refuses to run as root unless told; containers and CI often are root.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root)
PYTEST_ARGS ?=
BENCH_ARGS ?=
# bench/bench_warm_grading.py: e.g. WARM_BENCH_ARGS="--class-size 300"
WARM_BENCH_ARGS ?=
# pytest-xdist workers: independent groups of tests (see tests/support/grouping.py) share the cores.
# One more than the physical cores (what -n auto would take): with one per core the suite waited on
# kernels, JupyterLab, Slurm and the grading battery's timeouts. One more again (4 on 2 cores) kept both
# cores 98 % busy (busy time in /proc/stat over wall time) and the run took as long: the suite is CPU-bound.
# `=`, not `:=`: read when the recipe runs, once the venv (and psutil) is there, so a
# fresh clone gets the same count as a second run.
TEST_WORKERS ?= $(shell $(PY) -c "import os, psutil; print((psutil.cpu_count(logical=False) or os.cpu_count() or 1) + 1)" 2>/dev/null || echo auto)
# nbval's kernels fork from a warm template (autograder/warm; tests/e2e/test_warm_kernels.py proves their
# outputs and observations identical to cold kernels'); NBVAL_KERNEL=python3 for cold ones.
NBVAL_KERNEL ?= pte-warm
# --no-loadscope-reorder: files start in the order tests/support/grouping.py gives them (the longest first, from
# measured seconds); xdist's default reorder starts the files with the most test cases first, whatever they cost.
PYTEST = $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=15 \
	--nbval-kernel-name $(NBVAL_KERNEL)
export PATH := $(abspath $(BIN)):$(PATH)
# Bytecode: pip compiles nothing at install (--no-compile: 31 s for 12,000 modules, most never imported); a process
# writes a module's bytecode the first time it imports it, which PYTHONDONTWRITEBYTECODE (set by some CI images)
# would forbid, and every process would compile afresh. What a sandboxed kernel imports, which it may not write,
# is compiled at install by `python -m autograder.warm bytecode`.
unexport PYTHONDONTWRITEBYTECODE
# One BLAS/OpenMP thread per process: the test workers and the grader's jobs already share the
# cores, and oversubscribed threads spin-wait (a tiny forward pass went from 0.1 ms to 17 ms).
# make release uses the same setting, so stored outputs match what the tests recompute.
test test-quick release bench bench-grading bench-feedback bench-report: export OMP_NUM_THREADS ?= 1

.PHONY: lab hub hub-deps test test-quick release grade bench bench-grading bench-feedback bench-report bench-tests student-edition test-gpu venv clean image

venv: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(SYSTEM_PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --no-compile -r requirements.txt
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	$(PY) -m autograder.warm install > /dev/null
	$(PY) -m autograder.warm bytecode
	touch $(STAMP)

## Start JupyterLab on the student notebooks (pass extra options with LAB_ARGS='...').
lab: $(STAMP)
	$(BIN)/jupyter lab --ServerApp.root_dir=notebooks $(ROOT_FLAG) $(LAB_ARGS)

## A demo JupyterHub on localhost (deploy/jupyterhub/README.md): students pte-ann and pte-bob, instructor
## pte-instructor, nbgrader's exchange and the feedback service. make hub HUB_PORT=8000 HUB_ARGS='--lessons 01_tensors_and_views'
HUB_PORT ?= 8000
HUB_STATE ?= .hub
HUB_ARGS ?=
HUB_STAMP := $(VENV)/.hub-installed
hub-deps: $(HUB_STAMP)

# JupyterHub and its missing requirements, --no-deps (nothing the course pins changes); the proxy from npm
$(HUB_STAMP): $(STAMP) deploy/jupyterhub/requirements.txt deploy/jupyterhub/package.json deploy/jupyterhub/package-lock.json
	@command -v npm >/dev/null || { echo "make hub needs node and npm (Debian: apt-get install nodejs npm)" >&2; exit 2; }
	$(PY) -m pip install --quiet --no-deps -r deploy/jupyterhub/requirements.txt
	cd deploy/jupyterhub && npm ci --no-audit --no-fund --loglevel=error
	touch $(HUB_STAMP)

hub: $(HUB_STAMP)
	$(PY) deploy/jupyterhub/demo.py --state $(HUB_STATE) --port $(HUB_PORT) $(HUB_ARGS)

## Run every test: unit tests, release sync, pitfalls, nbval, round trips, grading battery; the 15 slowest last.
test: $(STAMP)
	bash tools/system-deps.sh
	$(PYTEST) $(PYTEST_ARGS)

## While editing a lesson: tests/unit and tests/course (tests/e2e is marked slow: grading runs, browser, edition).
## Narrow it to one lesson with PTE_LESSONS=05_checkpointing.
test-quick: $(STAMP)
	$(PYTEST) -m "not slow" $(PYTEST_ARGS)

## Re-execute the solutions in place, then regenerate notebooks/ from them.
release: $(STAMP)
	$(PY) -m autograder release

## Grade a class: make grade COURSE=/path/to/course GRADE_ARGS='--jobs 4 --assignment 01_tensors_and_views'
COURSE ?= .
GRADE_ARGS ?=
grade: $(STAMP)
	$(PY) -m autograder grade --course $(COURSE) $(GRADE_ARGS)

## On a CUDA machine: re-execute every solution with the GPU visible, run lesson 08's CUDA assertions,
## print the torch/CUDA/GPU versions and a summary table (no venv needed; autograder/gpu_runner/).
test-gpu:
	bash .ci/gpu-test.sh

## Write the student edition (no solutions, hidden tests, reference observations or grading tools):
## make student-edition DEST=../pytorch-essentials-student [EDITION_ARGS='--git --lesson 01_tensors_and_views']
DEST ?=
EDITION_ARGS ?=
student-edition: $(STAMP)
	@test -n "$(DEST)" || { echo "usage: make student-edition DEST=../pytorch-essentials-student [EDITION_ARGS=--git]" >&2; exit 2; }
	$(PY) -m autograder.edition $(DEST) $(EDITION_ARGS)

## Benchmarks (they print figures; nothing asserts a timing)
bench: $(STAMP)
	$(PY) -m bench.bench_lessons

bench-grading: $(STAMP)
	$(PY) -m bench.bench_grading $(BENCH_ARGS)
	$(PY) -m bench.bench_warm_grading $(WARM_BENCH_ARGS)

## Feedback on submit: submit -> feedback fetchable, one student and a burst of a class (FEEDBACK_BENCH_ARGS)
FEEDBACK_BENCH_ARGS ?=
bench-feedback: $(STAMP)
	$(PY) -m bench.bench_feedback $(FEEDBACK_BENCH_ARGS)

## The class report of 300 synthetic graded submissions, rendered (REPORT_BENCH_ARGS: --students, --lessons)
REPORT_BENCH_ARGS ?=
bench-report: $(STAMP)
	$(PY) -m bench.bench_report $(REPORT_BENCH_ARGS)

## Wall time of `make test` in a fresh clone, cold (venv created) and warm
bench-tests:
	bash bench/bench_tests.sh

## The grading image for a cluster (deploy/Containerfile; Debian and PyPI packages only), with podman or docker.
IMAGE ?= pte-grader:latest
CONTAINER_TOOL ?= $(shell command -v podman || command -v docker)
image:
	@test -n "$(CONTAINER_TOOL)" || { echo "make image needs podman or docker (Debian: apt-get install podman)" >&2; exit 2; }
	$(CONTAINER_TOOL) build -f deploy/Containerfile -t $(IMAGE) .

clean:
	rm -rf .pytest_cache gradebook.db
	find . -name __pycache__ -not -path './.venv/*' -prune -exec rm -rf {} +
