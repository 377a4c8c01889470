"""Pure parsers for tool output (iperf3, ss, tc, ping): text or dict in, records out."""
