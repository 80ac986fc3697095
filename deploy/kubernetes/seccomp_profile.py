#!/usr/bin/env python3
"""Write the seccomp profile the grading pods run under: a runtime's default profile, plus exactly the system
calls bubblewrap makes to build a kernel's sandbox in a user namespace of its own.

    python deploy/kubernetes/seccomp_profile.py BASE.json /var/lib/kubelet/seccomp/profiles/pte-bwrap.json

BASE is the default profile of the container runtime the nodes use (containerd's and Docker's come from
moby's ``profiles/seccomp/default.json``; Debian's golang-github-containers-common package ships podman's as
``/usr/share/containers/seccomp.json``). Those defaults allow ``unshare``, ``mount``, ``umount2`` and
``pivot_root``, and ``clone`` with namespace flags, only to a process holding CAP_SYS_ADMIN, which the
grading container does not have (it drops every capability). Inside a new user namespace bubblewrap holds
that capability over its own namespaces only, so the kernel's own checks still confine it; the profile only
stops refusing those calls. Nothing else is added: ``setns``, ``bpf``, ``keyctl``, ``clone3`` and the
new mount API stay as the base has them.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

BWRAP_SYSCALLS = ["clone", "mount", "pivot_root", "umount2", "unshare"]
RULE_COMMENT = "pte-bwrap: bubblewrap's user-namespace sandbox (deploy/kubernetes/README.md)"


def with_bwrap(base: dict) -> dict:
    """``base`` with one unconditional allow rule for :data:`BWRAP_SYSCALLS` (the base is not changed)."""
    if base.get("defaultAction") == "SCMP_ACT_ALLOW":
        raise ValueError("the base profile allows every call already: use a runtime's default profile")
    profile = json.loads(json.dumps(base))
    profile["syscalls"] = [rule for rule in profile.get("syscalls", []) if rule.get("comment") != RULE_COMMENT]
    profile["syscalls"].append({"names": list(BWRAP_SYSCALLS), "action": "SCMP_ACT_ALLOW", "args": [],
                                "comment": RULE_COMMENT})
    return profile


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        sys.exit(__doc__)
    source, target = (Path(a) for a in argv)
    profile = with_bwrap(json.loads(source.read_text()))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(profile, indent=2) + "\n")
    print(f"{target}: {source.name} + {', '.join(BWRAP_SYSCALLS)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
