"""What one run will do, decided before any submission runs: settings, the plan, shards."""
