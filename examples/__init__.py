"""Runnable examples: one agent per framework, asking a person through a local gateway."""
