"""The Discord channel (discord.py); only this package imports it."""
