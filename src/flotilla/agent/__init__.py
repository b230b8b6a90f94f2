"""``flotilla agent``: Pull mode's agent (Karmada's karmada-agent), one per Pull member cluster.

It registers its Cluster (:mod:`.registration`), renews its Lease (:mod:`.lease`) and runs the cluster-status,
execution and work-status controllers scoped to its one cluster (:mod:`.runtime`).
"""
