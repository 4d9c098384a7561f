"""The seam: the one page a channel is written against."""
