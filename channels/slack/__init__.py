"""The Slack channel (slack_sdk / slack-bolt); only this package imports them."""
