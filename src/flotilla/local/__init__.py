"""Flotilla on one machine: the control plane, simulated members and every controller in one process
(``flotilla up``, ``flotilla demo``)."""
