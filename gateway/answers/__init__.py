"""The one answer path's rules: what an answer means (verbs), how it decides (decisions)."""
