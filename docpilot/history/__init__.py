"""Runs over time: the SQLite index of the report folder, each metric's series, its moves and their causes, drift."""
