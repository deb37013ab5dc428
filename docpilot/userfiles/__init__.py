"""Files people write by hand, read safely: the intake of a named file and the readers that point into it."""
