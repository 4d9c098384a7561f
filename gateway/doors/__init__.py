"""What the core opens to channels: the ChannelContext and its doors."""
