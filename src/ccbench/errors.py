"""The one exception type users see: its message is the single line ccbench prints."""


class CcbenchError(Exception):
    """A problem the user can fix (bad config, not root, missing qdisc, ...)."""


class Unavailable(CcbenchError):
    """What the config asks for does not exist here (e.g. an AQM this kernel lacks).
    The workflow turns it into a skipped scenario with this reason, not a failure."""
