"""The `gateway` command line."""
