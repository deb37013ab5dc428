"""From failing records to causes and edits: the taxonomy, the diagnosis, suggestions, evidence and calibration."""
