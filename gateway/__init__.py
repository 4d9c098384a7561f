"""A self-hosted human-in-the-loop gateway that speaks the HumanLayer API."""

__version__ = "0.1.0"
