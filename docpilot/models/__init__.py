"""Models that answer a primed question: the offline extractive baseline and OpenAI-compatible services."""
