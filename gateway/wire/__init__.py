"""HumanLayer's wire shapes: the bodies agents send, and a stored request as JSON."""
