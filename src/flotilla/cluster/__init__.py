"""Member-cluster decisions as pure functions (no I/O): health and thresholds, condition taints, join objects.

* :mod:`flotilla.cluster.health` - what a probe of a member means (Ready condition with Karmada's reasons and
  messages), the success/failure threshold state machine that damps flips, condition bookkeeping
  (``lastTransitionTime`` moves only when the status does) and the status patch the status controller writes;
* :mod:`flotilla.cluster.taints` - the NoSchedule taints (``cluster.karmada.io/not-ready``,
  ``cluster.karmada.io/unreachable``) a Cluster carries for its Ready condition;
* :mod:`flotilla.cluster.join` - the Cluster, Secret and namespace objects ``flotilla join`` writes;
* :mod:`flotilla.cluster.resources` - the node and resource summaries of a member (``summarize``, the reference)
  and the projections its watch caches hold; :mod:`flotilla.cluster.summary_totals` - the same summaries kept as
  running totals that each watch event adjusts.

The controllers in :mod:`flotilla.controllers.cluster` and :mod:`flotilla.controllers.cluster_status` and the
``join``/``unjoin`` commands only read, call these and write.
"""
