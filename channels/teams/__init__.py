"""The Microsoft Teams channel (the Microsoft 365 Agents SDK's activity models and connector
client); only this package imports them."""
