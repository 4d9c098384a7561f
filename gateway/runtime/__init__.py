"""What runs beside the API: supervised connections, ownership, waiters, logs, metrics."""
