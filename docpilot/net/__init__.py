"""HTTP helpers every client shares: API keys, one retry policy honouring Retry-After, server-sent events."""
