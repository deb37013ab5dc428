"""The configuration: the config model, its loading and its option ranges."""
