"""ccbench: congestion-control comparisons on a dumbbell, from one config to one report."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("ccbench")
except PackageNotFoundError:  # a source tree that was not installed
    __version__ = "unknown"
