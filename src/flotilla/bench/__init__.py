"""The benchmarks (``flotilla bench``): their command line in :mod:`flotilla.bench.command`, each benchmark in a
module of its own (``apiserver``, ``failover``, ``propagate``, ``scale``) with what they share beside them.
"""
