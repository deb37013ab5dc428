"""Golden sets and attack probes: reading and checking them, what a set covers, a starter set."""
