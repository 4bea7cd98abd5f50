"""Building and publishing prioritized batches to the ``messages`` topic."""

from sender.messages import build_messages, publish

__all__ = ["build_messages", "publish"]
