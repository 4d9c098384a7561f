"""The Telegram channel (python-telegram-bot); only this package imports it."""
