"""DocPilot: measure a documentation Q&A assistant, question by question."""

__version__ = "0.1.0"
