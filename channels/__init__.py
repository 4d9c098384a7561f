"""Channels: one package per platform behind `gateway.seam.Channel`; the registry the
composition root reads is `channels.registry.REGISTRY`."""
