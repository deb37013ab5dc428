"""Report files: writing, reading and re-scoring them, the store of past runs, the scorecard and comparisons."""
