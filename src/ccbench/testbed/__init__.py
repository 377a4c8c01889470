"""Testbeds: the kinds (ccbench.testbed.kinds: local namespaces, SSH hosts), what a run
needs of one (base.Testbed), and making, removing and finding them (manage).

Empty on purpose: importing any testbed module imports this package first, and the
kinds' registry sits in the package's lowest layer."""
