"""The email channel: requests out by SMTP, replies in from a mailbox, read by pure functions."""
