"""Side effects after a commit: the outbox worker, deliveries and webhooks."""
