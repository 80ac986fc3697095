"""What the kernel and the judge say to each other, defined once and imported by both sides: the observation
format (``observations``), the typed messages that cross a process boundary (``messages``) and the notebook
protocol with the reference file (``protocol``). Standard library only (torch and numpy only where a value of
theirs is encoded), so the student edition, the grader and the GPU runner can all import it."""
