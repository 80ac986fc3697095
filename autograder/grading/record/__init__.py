"""Recording: nbgrader's autograde and feedback steps writing what ran into the gradebook."""
