"""What students submitted, read without following links, rebuilt into the notebook the grader runs."""
