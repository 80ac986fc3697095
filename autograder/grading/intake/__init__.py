"""What students submitted, read without following links or running anything (the notebook rebuilt for the
grader to run, the prediction cells read)."""
