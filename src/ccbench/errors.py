"""The one exception type users see: its message is the single line ccbench prints."""


class CcbenchError(Exception):
    """A problem the user can fix (bad config, not root, missing qdisc, ...)."""
