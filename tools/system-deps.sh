#!/usr/bin/env bash
# System packages the tests need beyond the venv, installed once before pytest starts (so parallel
# test workers never race for apt's lock):
#   bubblewrap  the grading sandbox (the grading command refuses to grade without it)
#   postgresql  the shared-gradebook test (a throwaway server on loopback)
#   slurm-wlm, munge  the Slurm recipe's test (a throwaway one-node cluster on loopback)
#   chromium    the browser test (headless; driven by Playwright with its executable_path)
#   nodejs, npm the demo hub's proxy (configurable-http-proxy from npm; tests/e2e/test_hub.py, make hub)
# As root with apt-get, missing ones are installed; otherwise the script says what is missing
# and the tests that need it fail with that message.
set -uo pipefail
want=()
command -v bwrap >/dev/null || want+=(bubblewrap)
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || want+=(postgresql)
command -v slurmctld >/dev/null || [ -x /usr/sbin/slurmctld ] || want+=(slurm-wlm)
command -v munged >/dev/null || [ -x /usr/sbin/munged ] || want+=(munge)
command -v chromium >/dev/null || want+=(chromium)
command -v npm >/dev/null || want+=(nodejs npm)
[ ${#want[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "system-deps: missing ${want[*]}; install them (Debian: apt-get install ${want[*]})" >&2
    exit 0
fi
echo "system-deps: installing ${want[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -qq "${want[@]}" >/dev/null 2>&1 || {
    apt-get update -qq >/dev/null 2>&1
    apt-get install -y -qq "${want[@]}" >/dev/null 2>&1 || echo "system-deps: could not install ${want[*]}" >&2
}
exit 0
