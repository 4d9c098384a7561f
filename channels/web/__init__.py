"""The built-in web console: every request is listed there, and answered from there."""

from channels.web.channel import WebChannel

__all__ = ["WebChannel"]
