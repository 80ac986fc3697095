#!/usr/bin/env bash
# How long `make test` takes a newcomer: a fresh clone, then `make test` twice.
#   cold: the venv is created and installed first (as on a new machine or in CI)
#   warm: the venv is already there (a contributor's second run)
# It prints wall times; nothing here asserts a timing. Usage: bash bench/bench_tests.sh [CLONE_DIR]
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
dest="${1:-$(mktemp -d)/pytorch-essentials}"
git clone --quiet "$repo" "$dest"
cd "$dest"
run() {
    local label=$1 start status
    start=$SECONDS
    if make test > "$dest/make-test-$label.log" 2>&1; then status=passed; else status=FAILED; fi
    printf '%-5s make test: %4d s (%s; log: %s)\n' "$label" "$((SECONDS - start))" "$status" \
        "$dest/make-test-$label.log"
    grep -E '^[=]+ .*(passed|failed).* in ' "$dest/make-test-$label.log" | tail -1 || true
}
echo "fresh clone of $(git -C "$repo" rev-parse --short HEAD) in $dest on $(nproc) cores"
run cold
run warm
echo "slowest tests (warm run):"
sed -n '/slowest 15 durations/,/^$/p' "$dest/make-test-warm.log" | head -17
