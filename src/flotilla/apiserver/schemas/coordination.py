"""coordination.k8s.io/v1 Lease."""

from __future__ import annotations

from flotilla.apiserver.schemas._build import Schema, integer, kind_schema, obj, string, timestamp


def lease_schema() -> Schema:
    return kind_schema(
        "coordination.k8s.io",
        "v1",
        "Lease",
        "A time-limited claim, used for leader election and heartbeats.",
        {
            "spec": obj(
                "The claim.",
                {
                    "holderIdentity": string("Identity of the current holder."),
                    "leaseDurationSeconds": integer(
                        "Seconds candidates wait after renewTime before taking over."
                    ),
                    "acquireTime": timestamp("When the current holder acquired the lease.", nullable=True),
                    "renewTime": timestamp("When the holder last renewed the lease.", nullable=True),
                    "leaseTransitions": integer("How many times the holder has changed."),
                    "strategy": string("Strategy for picking the next holder (coordinated leader election)."),
                    "preferredHolder": string(
                        "Holder that should take over next (coordinated leader election)."
                    ),
                },
                open=True,
            ),
        },
    )
