"""Channels: one package per platform behind `channels.base.Channel`; the registry the
composition root reads is `channels.registry.REGISTRY`."""
