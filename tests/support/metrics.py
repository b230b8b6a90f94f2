"""Reading a ``/metrics`` exposition back in tests, with prometheus_client's own parser.

:func:`parse_exposition` gives the families by the name they are exposed under (a counter's with its ``_total``, as in
the ``# TYPE`` line), each with its samples as ``(sample name, labels, value)``; :func:`check_histograms` checks
that every histogram child has cumulative buckets ending with ``+Inf`` equal to its ``_count``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families


@dataclass
class Family:
    name: str
    type: str = "unknown"
    help: str | None = None
    samples: list[tuple[str, dict[str, str], float]] = field(default_factory=list)

    def value(self, sample: str, **labels: str) -> float:
        found = [v for n, ls, v in self.samples if n == sample and ls == labels]
        assert len(found) == 1, f"{sample}{labels}: {len(found)} samples in {self.samples}"
        return found[0]


def parse_exposition(text: str) -> dict[str, Family]:
    """The families of a text exposition, by exposed name; the parser refuses a malformed one."""
    families: dict[str, Family] = {}
    for metric in text_string_to_metric_families(text):
        name = metric.name + "_total" if metric.type == "counter" else metric.name
        assert name not in families, f"{name} exposed twice"
        families[name] = Family(name, metric.type, metric.documentation,
                                [(s.name, dict(s.labels), float(s.value)) for s in metric.samples])
    return families


def check_histograms(families: dict[str, Family]) -> None:
    """Every histogram child: cumulative buckets ending with +Inf, which equals _count."""
    for fam in families.values():
        if fam.type != "histogram":
            continue
        children: dict[tuple[tuple[str, str], ...], list[tuple[float, float]]] = {}
        for name, labels, value in fam.samples:
            if name.endswith("_bucket"):
                labels = dict(labels)
                le = labels.pop("le")
                children.setdefault(tuple(sorted(labels.items())), []).append((float(le), value))
        for key, buckets in children.items():
            bounds = [b for b, _ in buckets]
            assert bounds == sorted(bounds) and bounds[-1] == math.inf, (fam.name, bounds)
            counts = [c for _, c in buckets]
            assert counts == sorted(counts), (fam.name, counts)
            assert fam.value(fam.name + "_count", **dict(key)) == counts[-1]


def sample_names(text: str) -> set[str]:
    """The names of every sample exposed."""
    return {s.name for metric in text_string_to_metric_families(text) for s in metric.samples}
