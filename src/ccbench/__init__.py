"""ccbench: congestion-control comparisons on a dumbbell, from one config to one report."""

__version__ = "0.1.0"
