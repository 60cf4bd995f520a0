"""Benchmarks: scripts that measure and write their tables to bench/results/ (run as `python -m bench.NAME`)."""
