"""What one run will do, decided before any submission runs: settings, shards, the plan and its product (each
:class:`~autograder.grading.plan.job.Job`)."""
