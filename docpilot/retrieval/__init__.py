"""Ranking sections for a question: the index on disk, BM25, embedders and their fusion."""
