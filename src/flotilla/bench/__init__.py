"""Benchmarks that need more than one process: ``flotilla bench failover`` and its control-plane process.

``flotilla bench apiserver`` lives in :mod:`flotilla.bench.command`, which also holds the argument parsers of all.
"""
