"""A binding's Works, found through indexes on the shared Work informer (the binding and plannedMove controllers).

Every Work carries its binding's permanent id as a label (``resourcebinding.karmada.io/permanent-id`` or
``clusterresourcebinding.karmada.io/permanent-id``); :func:`index_works_by_binding` adds an index on each to the
Work informer (once, whichever controller comes first) and :func:`works_of` reads them.

Also whether the plannedMove controller runs beside the binding controller (:func:`planned_moves_running`): only
then does the binding controller hold a render for a planned move that has no record yet (D21), since only that
controller writes the record that ends the hold.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flotilla.api import labels as L
from flotilla.api.resources import CLUSTER_RESOURCE_BINDINGS, RESOURCE_BINDINGS, WORKS
from flotilla.client import Informer
from flotilla.client.informer import label_indexer
from flotilla.propagation.works import BindingRef

if TYPE_CHECKING:
    from flotilla.runtime.base import Controller

__all__ = ["CRB_ID_INDEX", "RB_ID_INDEX", "binding_and_work_informers", "index_works_by_binding", "mark_planned_moves_running",
           "planned_moves_running", "works_of", "works_with_label"]

#: Work cache indexes: the binding permanent id a Work carries.
RB_ID_INDEX = "resourcebinding-permanent-id"
CRB_ID_INDEX = "clusterresourcebinding-permanent-id"
_INDEX_OF_LABEL = {L.RESOURCE_BINDING_PERMANENT_ID_LABEL: RB_ID_INDEX,
                   L.CLUSTER_RESOURCE_BINDING_PERMANENT_ID_LABEL: CRB_ID_INDEX}


def _add_index(inf: Informer, name: str, label: str) -> None:
    try:
        inf.add_indexer(name, label_indexer(label))
    except ValueError:  # another controller sharing the informer added it already
        pass


def index_works_by_binding(works: Informer) -> None:
    """Index the Work informer by the binding permanent ids its Works carry."""
    for label, name in _INDEX_OF_LABEL.items():
        _add_index(works, name, label)


def binding_and_work_informers(controller: Controller) -> tuple[Informer, Informer, Informer]:
    """``controller``'s informers of ResourceBindings, ClusterResourceBindings and Works, the Works indexed by
    their binding (:func:`index_works_by_binding`)."""
    rbs = controller.informer(RESOURCE_BINDINGS)
    crbs = controller.informer(CLUSTER_RESOURCE_BINDINGS)
    works = controller.informer(WORKS)
    index_works_by_binding(works)
    return rbs, crbs, works


def works_of(works: Informer, ref: BindingRef) -> list[dict[str, Any]]:
    """The cached Works of the binding ``ref`` (none when it has no permanent id yet)."""
    if not ref.permanent_id:
        return []
    return works_with_label(works, ref.id_label, ref.permanent_id)


def works_with_label(works: Informer, label: str, permanent_id: str) -> list[dict[str, Any]]:
    """The cached Works whose binding permanent-id ``label`` (either kind's) is ``permanent_id``."""
    return list(works.store.by_index(_INDEX_OF_LABEL[label], permanent_id))


#: ``ControllerContext.extras`` key set while the plannedMove controller runs in the controller-manager.
_PLANNED_MOVES_RUNNING = "planned-moves-running"


def mark_planned_moves_running(ctx: Any) -> None:
    ctx.extras[_PLANNED_MOVES_RUNNING] = True


def planned_moves_running(ctx: Any) -> bool:
    """Whether the plannedMove controller runs in the controller-manager of ``ctx``."""
    return bool(ctx.extras.get(_PLANNED_MOVES_RUNNING))
