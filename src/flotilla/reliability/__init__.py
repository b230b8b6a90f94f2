"""Reliability trials: real faults against real processes, and the invariants that must hold afterwards."""
