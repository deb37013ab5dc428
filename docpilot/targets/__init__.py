"""Targets: assistants DocPilot did not build, asked over HTTP as their config maps them.

``ask`` sends one question by the target's body template and reads its reply (JSON,
SSE or NDJSON) by its JMESPath mapping into a ``RemoteTurn``; ``sources`` turns what a
reply names (a URL, a path, a page and a heading) into DocPilot's page and section ids,
against the docs the run reads.
"""
