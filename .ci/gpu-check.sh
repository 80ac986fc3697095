#!/usr/bin/env bash
# GPU runner check: re-execute every solution notebook with CUDA available and compare its
# stored outputs (nbval), then the lesson-independent unit tests. Usage on a CUDA machine:
#   bash .ci/gpu-check.sh            (with the venv from `make venv`, or PYTHON=... set)
# Where Jupyter's packages are missing, wheels in .whl/ are installed into /tmp/site first.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] && PYTHON=.venv/bin/python
if [ -d .whl ] && ! $PYTHON -c "import nbval, nbclient, ipykernel" 2>/dev/null; then
  $PYTHON -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
$PYTHON - <<'PY'
import torch
print("torch", torch.__version__, "| cuda available:", torch.cuda.is_available(),
      "|", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU")
PY
status=0
$PYTHON -m pytest -q -p no:cacheprovider --nbval --nbval-current-env \
  --nbval-sanitize-with tests/nbval_sanitize.cfg solutions/ -o addopts="" || status=1
$PYTHON -m pytest -q -p no:cacheprovider -o addopts="" tests/test_checks.py tests/test_explorers.py || status=1
exit $status
