"""The verdict on each test cell and the reference observations it is judged with."""
