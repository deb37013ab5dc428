"""The configuration and the files people write by hand: the config model, its loading, golden sets and probes."""
