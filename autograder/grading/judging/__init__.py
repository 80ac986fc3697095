"""The verdict on each test cell (judged outside the kernel) and each check's outcome for the report."""
