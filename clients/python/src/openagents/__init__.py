"""openagents (placeholder)."""
