"""Testbeds: `local` (network namespaces on this machine) and `remote` (SSH hosts)."""
