"""Where submitted code runs: the sandbox policy, bubblewrap for a cold kernel, cgroups."""
