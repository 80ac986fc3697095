"""The end of a run: scores read back and checked against the verdicts, grades.csv, the report."""
