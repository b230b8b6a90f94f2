"""Propagation: from a claimed template to objects in the members and back, as pure functions.

* :mod:`~flotilla.propagation.binding_spec` - the ResourceBinding a claimed template gets;
* :mod:`~flotilla.propagation.policy_changes` and :mod:`~flotilla.propagation.attached_bindings` - which templates
  and bindings a policy change touches;
* :mod:`~flotilla.scheduler.triggers` - when the scheduler controller schedules a binding and what it
  writes back;
* :mod:`~flotilla.propagation.works` - the Work for each target cluster (replicas, overrides, labels, injected
  state);
* :mod:`~flotilla.propagation.apply` - creating, updating or refusing the object in a member;
* :mod:`~flotilla.propagation.status` - reflecting members' status onto Works, bindings and templates;
* :mod:`~flotilla.propagation.rebalance` - WorkloadRebalancer;
* :mod:`~flotilla.propagation.written` and :mod:`~flotilla.propagation.template_versions` - what a controller
  wrote and which template version a binding saw.

Which policy claims a template is :mod:`flotilla.policy`; where a binding goes is :mod:`flotilla.scheduler`.
"""
