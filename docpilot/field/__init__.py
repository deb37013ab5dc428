"""Questions from the field: a production log of an assistant's turns, scored without gold.

``log`` reads a JSONL or CSV log by its mapping (``docpilot.config.logs``), ``turns``
scores each turn with the eval's own gold-free metrics and ranks the docs' sections
nearest its question, ``summary`` aggregates them, ``gaps`` groups the questions the
assistant did not answer well into pages to write and pages it missed, and ``run``
streams a whole log through them (docs/field.md).
"""
