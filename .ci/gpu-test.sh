#!/usr/bin/env bash
# GPU runner (make test-gpu; the CI job on [self-hosted, gpu]): every solution re-executed with CUDA
# available (nbval where installed: outputs compared except in cells tagged nbval-ignore-output, and with
# PTE_EXPECT_CUDA=1 a requires-cuda cell that did not run fails), then lesson 08's test_cuda_* assertions;
# versions first, a summary table last. The program, its exit status and its GPU_TEST_* settings:
# autograder/gpu_runner/. This picks the first of $PYTHON, .venv/bin/python, python3, python that
# has torch installed (found, not imported: an import costs seconds; the GPU machine may have no venv and
# no network) and runs the module with it.
set -uo pipefail
cd "$(dirname "$0")/.."
for py in ${PYTHON:-} .venv/bin/python python3 python; do
  if command -v "$py" >/dev/null 2>&1 && "$py" -c "import importlib.util as u, sys; sys.exit(u.find_spec('torch') is None)" >/dev/null 2>&1; then
    exec "$py" -m autograder.gpu_runner "$@"
  fi
done
echo "gpu-test: no Python with torch installed (tried \$PYTHON, .venv/bin/python, python3, python)" >&2
exit 2
