"""Golden sets drafted from the docs: how much a question borrows from its section, model rewrites, and review."""
