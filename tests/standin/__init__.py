"""Stand-in servers for tests (no engine, no GPU)."""
