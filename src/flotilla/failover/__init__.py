"""Failover: cluster taint policies, taint-based eviction, graceful eviction and state preservation."""
