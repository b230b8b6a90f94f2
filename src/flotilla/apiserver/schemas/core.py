"""core/v1 kinds: Namespace, ConfigMap, Secret, Service, ServiceAccount, PersistentVolumeClaim, Event, Pod, Node.

These schemas document the commonly used fields. Objects whose fields are not all listed carry
``x-kubernetes-preserve-unknown-fields: true`` so that any valid Kubernetes manifest passes validation.
"""

from __future__ import annotations

from flotilla.apiserver.schemas._build import (
    Schema,
    array,
    atomic_list,
    boolean,
    byte_string,
    free_object,
    int64,
    int_or_string,
    integer,
    keyed_list,
    kind_schema,
    map_of,
    obj,
    quantity_map,
    string,
    string_list,
    string_map,
    string_set,
    timestamp,
)
from flotilla.apiserver.schemas.meta import (
    label_selector,
    local_object_reference,
    object_meta,
    object_reference,
    taint,
    toleration,
    workload_conditions,
)

# --------------------------------------------------------------------------------------------------
# Pod building blocks


def env_var() -> Schema:
    return obj(
        "An environment variable for a container.",
        {
            "name": string("Variable name."),
            "value": string("Literal value; $(VAR) references to earlier variables are expanded."),
            "valueFrom": free_object(
                "Take the value from a ConfigMap key, Secret key, pod field or container resource instead."
            ),
        },
        ["name"],
        open=True,
    )


def container_port() -> Schema:
    return obj(
        "A network port the container exposes (informational; it does not open anything).",
        {
            "name": string("IANA service name for the port, unique within the pod."),
            "containerPort": integer("Port number on the pod's IP address."),
            "protocol": string("UDP, TCP (default) or SCTP."),
            "hostPort": integer("Port to bind on the host, if any."),
            "hostIP": string("Host IP to bind the host port to."),
        },
        ["containerPort"],
        open=True,
    )


def resource_requirements() -> Schema:
    return obj(
        "Compute resources of a container.",
        {
            "requests": quantity_map(
                "Minimum resources the scheduler reserves, e.g. cpu: 250m, memory: 64Mi."
            ),
            "limits": quantity_map("Maximum resources the container may use."),
        },
        open=True,
    )


def volume_mount() -> Schema:
    return obj(
        "Mounts a pod volume into the container's filesystem.",
        {
            "name": string("Name of the pod volume."),
            "mountPath": string("Path inside the container; must not contain ':'."),
            "subPath": string("Sub-path of the volume to mount instead of its root."),
            "readOnly": boolean("Mount read-only."),
        },
        ["name", "mountPath"],
        open=True,
    )


def container(what: str = "container") -> Schema:
    return obj(
        f"A {what} in the pod.",
        {
            "name": string("Name, unique within the pod (DNS label)."),
            "image": string("Container image reference."),
            "imagePullPolicy": string("Always, IfNotPresent or Never."),
            "command": string_list("Entrypoint array, replacing the image's ENTRYPOINT."),
            "args": string_list("Arguments, replacing the image's CMD."),
            "workingDir": string("Working directory; defaults to the image's."),
            "env": keyed_list("Environment variables.", env_var(), "name"),
            "envFrom": array(
                "Sources (ConfigMaps, Secrets) whose keys become environment variables.",
                free_object("An env source."),
            ),
            "ports": keyed_list(
                "Ports the container exposes.", container_port(), "containerPort", "protocol"
            ),
            "resources": resource_requirements(),
            "volumeMounts": keyed_list("Volumes to mount.", volume_mount(), "mountPath"),
            "livenessProbe": free_object("Probe whose failure restarts the container."),
            "readinessProbe": free_object("Probe whose failure removes the pod from service endpoints."),
            "startupProbe": free_object("Probe that must succeed before the other probes start."),
            "lifecycle": free_object("Hooks run after start and before stop."),
            "securityContext": free_object("Security options for the container."),
            "restartPolicy": string(
                "For init containers only: 'Always' makes it a sidecar that keeps running."
            ),
            "stdin": boolean("Allocate a stdin buffer."),
            "tty": boolean("Allocate a TTY."),
            "terminationMessagePath": string("File the termination message is read from."),
            "terminationMessagePolicy": string("File or FallbackToLogsOnError."),
        },
        ["name"],
        open=True,
    )


def volume() -> Schema:
    return obj(
        "A named volume pods can mount; exactly one source field (configMap, secret, emptyDir, "
        "persistentVolumeClaim, projected, hostPath...) is set.",
        {
            "name": string("Volume name, unique within the pod."),
            "configMap": free_object("Populate the volume from a ConfigMap."),
            "secret": free_object("Populate the volume from a Secret."),
            "emptyDir": free_object("A scratch directory that lives as long as the pod."),
            "persistentVolumeClaim": obj(
                "Mount the volume bound to a PersistentVolumeClaim.",
                {
                    "claimName": string("Name of the claim in the pod's namespace."),
                    "readOnly": boolean("Mount read-only."),
                },
                open=True,
            ),
            "projected": free_object("Several sources projected into one directory."),
            "hostPath": free_object("A directory of the host node."),
            "downwardAPI": free_object("Pod fields exposed as files."),
        },
        ["name"],
        open=True,
    )


def pod_spec() -> Schema:
    return obj(
        "Desired behaviour of a pod.",
        {
            "containers": keyed_list("Containers of the pod; at least one.", container(), "name"),
            "initContainers": keyed_list(
                "Containers run in order before the regular containers.", container("init container"), "name"
            ),
            "ephemeralContainers": keyed_list(
                "Debugging containers added to a running pod.", container("ephemeral container"), "name"
            ),
            "volumes": keyed_list(
                "Volumes the containers may mount.", volume(), "name", patch_strategy="merge,retainKeys"
            ),
            "restartPolicy": string("Always (default), OnFailure or Never."),
            "terminationGracePeriodSeconds": int64("Seconds given to the pod to stop gracefully."),
            "activeDeadlineSeconds": int64("Seconds the pod may be active before it is failed."),
            "dnsPolicy": string("ClusterFirst (default), ClusterFirstWithHostNet, Default or None."),
            "nodeSelector": string_map("Labels a node must carry for the pod to be scheduled there."),
            "nodeName": string("Node the pod is bound to; set by the scheduler (or directly to skip it)."),
            "serviceAccountName": string("ServiceAccount the pod runs as."),
            "serviceAccount": string("Deprecated alias of serviceAccountName."),
            "automountServiceAccountToken": boolean("Mount the service account token."),
            "hostNetwork": boolean("Use the host's network namespace."),
            "hostname": string("Hostname of the pod; defaults to the pod name."),
            "subdomain": string("Subdomain, for a FQDN '<hostname>.<subdomain>.<ns>.svc.<cluster domain>'."),
            "affinity": free_object("Node and pod (anti-)affinity rules."),
            "tolerations": atomic_list("Taints the pod tolerates.", toleration()),
            "schedulerName": string("Scheduler that places the pod; defaults to the default scheduler."),
            "priorityClassName": string("PriorityClass giving the pod its priority."),
            "priority": integer("Priority value resolved from priorityClassName."),
            "securityContext": free_object("Pod-level security attributes."),
            "imagePullSecrets": keyed_list("Secrets used to pull images.", local_object_reference(), "name"),
            "readinessGates": atomic_list(
                "Extra conditions that must be True for the pod to be ready.",
                obj(
                    "A readiness gate.",
                    {"conditionType": string("Pod condition type to wait for.")},
                    ["conditionType"],
                ),
            ),
            "topologySpreadConstraints": keyed_list(
                "How pods spread across topology domains.",
                obj(
                    "A topology spread constraint.",
                    {
                        "maxSkew": integer("Largest allowed difference in matching pods between domains."),
                        "topologyKey": string("Node label whose values define the domains."),
                        "whenUnsatisfiable": string("DoNotSchedule or ScheduleAnyway."),
                        "labelSelector": label_selector("Pods counted when computing the skew."),
                    },
                    ["maxSkew", "topologyKey", "whenUnsatisfiable"],
                    open=True,
                ),
                "topologyKey",
                "whenUnsatisfiable",
            ),
        },
        open=True,
    )


def pod_template_spec() -> Schema:
    return obj(
        "Template of the pods to create: their metadata and spec.",
        {"metadata": object_meta(), "spec": pod_spec()},
        open=True,
    )


def container_state() -> Schema:
    return obj(
        "State of a container: exactly one of waiting, running and terminated.",
        {
            "waiting": obj(
                "The container is not yet running.",
                {
                    "reason": string("Why it is waiting, e.g. ContainerCreating."),
                    "message": string("Details."),
                },
                open=True,
            ),
            "running": obj(
                "The container is running.",
                {"startedAt": timestamp("When it started.", nullable=True)},
                open=True,
            ),
            "terminated": obj(
                "The container has exited.",
                {
                    "exitCode": integer("Exit status."),
                    "signal": integer("Signal that killed it, if any."),
                    "reason": string("Short reason, e.g. Completed or Error."),
                    "message": string("Details."),
                    "startedAt": timestamp("When it started.", nullable=True),
                    "finishedAt": timestamp("When it exited.", nullable=True),
                    "containerID": string("Runtime container id."),
                },
                open=True,
            ),
        },
        open=True,
    )


def container_status() -> Schema:
    return obj(
        "Observed state of one container.",
        {
            "name": string("Container name."),
            "image": string("Image the container runs."),
            "imageID": string("Resolved image id (may be empty)."),
            "containerID": string("Runtime container id."),
            "ready": boolean("Whether the container passes its readiness probe."),
            "started": boolean("Whether the container passed its startup probe."),
            "restartCount": integer("Number of restarts."),
            "state": container_state(),
            "lastState": container_state(),
        },
        open=True,
    )


def pod_status() -> Schema:
    ip = obj("An IP address of the pod.", {"ip": string("The address.")}, open=True)
    return obj(
        "Most recently observed state of the pod.",
        {
            "phase": string("Pending, Running, Succeeded, Failed or Unknown."),
            "conditions": workload_conditions("pod"),
            "message": string("Why the pod is in this state."),
            "reason": string("Short CamelCase reason, e.g. Evicted."),
            "hostIP": string("IP of the node the pod runs on."),
            "hostIPs": keyed_list("IPs of the node.", ip, "ip"),
            "podIP": string("Primary IP of the pod."),
            "podIPs": keyed_list("IPs of the pod; the first equals podIP.", ip, "ip"),
            "nominatedNodeName": string("Node the pod may be placed on after preemption."),
            "startTime": timestamp("When the kubelet acknowledged the pod.", nullable=True),
            "qosClass": string("Guaranteed, Burstable or BestEffort."),
            "observedGeneration": int64("metadata.generation this status reflects."),
            "containerStatuses": array("One entry per container.", container_status()),
            "initContainerStatuses": array("One entry per init container.", container_status()),
            "ephemeralContainerStatuses": array("One entry per ephemeral container.", container_status()),
        },
        open=True,
    )


# --------------------------------------------------------------------------------------------------
# Kinds


def namespace_schema() -> Schema:
    return kind_schema(
        "",
        "v1",
        "Namespace",
        "A scope for names. Deleting a namespace deletes everything in it.",
        {
            "spec": obj(
                "Desired state of the namespace.",
                {"finalizers": string_list("Cleanup steps that must run before the namespace is removed.")},
                open=True,
            ),
            "status": obj(
                "Observed state of the namespace.",
                {
                    "phase": string("Active, or Terminating once deletion was requested."),
                    "conditions": workload_conditions("namespace"),
                },
                open=True,
            ),
        },
    )


def configmap_schema() -> Schema:
    return kind_schema(
        "",
        "v1",
        "ConfigMap",
        "Non-confidential configuration data as key/value pairs.",
        {
            "data": string_map("UTF-8 values by key."),
            "binaryData": map_of(
                "Binary values (base64 in JSON) by key; keys must not repeat those of data.", byte_string("")
            ),
            "immutable": boolean("When true, data cannot change any more (the object can only be deleted)."),
        },
    )


def secret_schema() -> Schema:
    return kind_schema(
        "",
        "v1",
        "Secret",
        "Confidential data such as passwords, tokens or keys.",
        {
            "data": map_of("Values by key, base64-encoded in JSON.", byte_string("")),
            "stringData": string_map("Write-only convenience: plain-text values merged into data on write."),
            "type": string("Purpose of the secret (e.g. Opaque, kubernetes.io/tls); defaults to Opaque."),
            "immutable": boolean("When true, data cannot change any more."),
        },
    )


def service_schema() -> Schema:
    port = obj(
        "A port the service exposes.",
        {
            "name": string("Port name; required when there are several ports."),
            "protocol": string("TCP (default), UDP or SCTP."),
            "appProtocol": string("Application protocol hint."),
            "port": integer("Port exposed by the service."),
            "targetPort": int_or_string("Number or name of the port on the pods; defaults to port."),
            "nodePort": integer("Port on every node (NodePort and LoadBalancer services)."),
        },
        ["port"],
        open=True,
    )
    ingress = obj(
        "A load-balancer ingress point.",
        {
            "ip": string("IP address of the ingress point."),
            "hostname": string("DNS name of the ingress point."),
            "ipMode": string("VIP or Proxy."),
            "ports": array("Status of the service ports.", free_object("Port status.")),
        },
        open=True,
    )
    return kind_schema(
        "",
        "v1",
        "Service",
        "A stable virtual address (and DNS name) for a set of pods chosen by a label selector.",
        {
            "spec": obj(
                "Desired behaviour of the service.",
                {
                    "type": string("ClusterIP (default), NodePort, LoadBalancer or ExternalName."),
                    "selector": string_map("Pods with these labels receive the traffic."),
                    "ports": keyed_list("Exposed ports.", port, "port", "protocol"),
                    "clusterIP": string(
                        "Virtual IP; assigned by the server, or 'None' for a headless service."
                    ),
                    "clusterIPs": string_list("Virtual IPs, one per IP family."),
                    "externalIPs": string_list("Extra IPs routed to the service."),
                    "externalName": string("DNS name to alias (ExternalName services)."),
                    "sessionAffinity": string("ClientIP or None (default)."),
                    "loadBalancerIP": string("Deprecated: requested load-balancer IP."),
                    "loadBalancerClass": string("Load-balancer implementation."),
                    "externalTrafficPolicy": string("Cluster or Local."),
                    "internalTrafficPolicy": string("Cluster or Local."),
                    "healthCheckNodePort": integer("Health-check node port for Local traffic policy."),
                    "publishNotReadyAddresses": boolean("Publish endpoints of pods that are not ready."),
                    "ipFamilies": string_list("IP families (IPv4, IPv6)."),
                    "ipFamilyPolicy": string("SingleStack, PreferDualStack or RequireDualStack."),
                },
                open=True,
            ),
            "status": obj(
                "Observed state of the service.",
                {
                    "loadBalancer": obj(
                        "Load-balancer status.", {"ingress": array("Ingress points.", ingress)}, open=True
                    ),
                    "conditions": workload_conditions("service"),
                },
                open=True,
            ),
        },
    )


def serviceaccount_schema() -> Schema:
    return kind_schema(
        "",
        "v1",
        "ServiceAccount",
        "An identity for processes running in pods.",
        {
            "secrets": keyed_list(
                "Secrets pods using this account may use (legacy token secrets).", object_reference(), "name"
            ),
            "imagePullSecrets": array(
                "Secrets used to pull images for pods using this account.", local_object_reference()
            ),
            "automountServiceAccountToken": boolean("Whether pods mount an API token by default."),
        },
    )


def persistentvolumeclaim_schema() -> Schema:
    return kind_schema(
        "",
        "v1",
        "PersistentVolumeClaim",
        "A request for storage, bound to a PersistentVolume.",
        {
            "spec": obj(
                "Desired characteristics of the volume.",
                {
                    "accessModes": string_list(
                        "ReadWriteOnce, ReadOnlyMany, ReadWriteMany, ReadWriteOncePod."
                    ),
                    "selector": label_selector("Label query over volumes to consider for binding."),
                    "resources": obj(
                        "Minimum resources the volume must have.",
                        {
                            "requests": quantity_map("Requested resources, e.g. storage: 10Gi."),
                            "limits": quantity_map("Maximum resources."),
                        },
                        open=True,
                    ),
                    "volumeName": string("PersistentVolume the claim is bound to."),
                    "storageClassName": string("StorageClass to provision from."),
                    "volumeMode": string("Filesystem (default) or Block."),
                    "dataSource": free_object("Object to populate the volume from."),
                    "dataSourceRef": free_object("Object to populate the volume from (any API group)."),
                    "volumeAttributesClassName": string("VolumeAttributesClass of the volume."),
                },
                open=True,
            ),
            "status": obj(
                "Observed state of the claim.",
                {
                    "phase": string("Pending, Bound or Lost."),
                    "accessModes": string_list("Access modes of the bound volume."),
                    "capacity": quantity_map("Capacity of the bound volume."),
                    "conditions": workload_conditions("claim"),
                },
                open=True,
            ),
        },
    )


def event_schema() -> Schema:
    return kind_schema(
        "",
        "v1",
        "Event",
        "A report of something that happened to an object, kept for a limited time.",
        {
            "involvedObject": object_reference("The object the event is about."),
            "reason": string("Short machine-readable reason, e.g. Scheduled."),
            "message": string("Human-readable description."),
            "source": obj(
                "Component that reported the event (legacy).",
                {"component": string("Reporting component."), "host": string("Node of the component.")},
            ),
            "firstTimestamp": timestamp("When the event was first recorded.", nullable=True),
            "lastTimestamp": timestamp("When the event most recently occurred.", nullable=True),
            "count": integer("How many times the event occurred."),
            "type": string("Normal or Warning."),
            "eventTime": timestamp(
                "When the event was first observed (microsecond precision).", nullable=True
            ),
            "series": obj(
                "Data about a series of repeated events.",
                {
                    "count": integer("Occurrences in the series so far."),
                    "lastObservedTime": timestamp("Time of the last occurrence.", nullable=True),
                },
                open=True,
            ),
            "action": string("What was done, or failed, about the object."),
            "related": object_reference("A secondary object involved."),
            "reportingComponent": string("Controller that emitted the event, e.g. 'kubernetes.io/kubelet'."),
            "reportingInstance": string("Instance of the reporting controller."),
        },
    )


def pod_schema() -> Schema:
    return kind_schema(
        "",
        "v1",
        "Pod",
        "A group of containers scheduled together on one node.",
        {"spec": pod_spec(), "status": pod_status()},
    )


def node_schema() -> Schema:
    node_condition = obj(
        "An observation about the node, reported by its kubelet (or a node problem detector).",
        {
            "type": string("Ready, MemoryPressure, DiskPressure, PIDPressure, NetworkUnavailable..."),
            "status": string("True, False or Unknown."),
            "reason": string("CamelCase reason for the last transition, e.g. KubeletReady."),
            "message": string("Human-readable details."),
            "lastHeartbeatTime": timestamp("When the condition was last reported.", nullable=True),
            "lastTransitionTime": timestamp("When status last changed.", nullable=True),
        },
        ["type", "status"],
        open=True,
    )
    address = obj(
        "An address of the node.",
        {
            "type": string("Hostname, InternalIP, ExternalIP, InternalDNS or ExternalDNS."),
            "address": string("The address."),
        },
        ["type", "address"],
        open=True,
    )
    info_fields = {
        "machineID": "Machine id reported by the node (/etc/machine-id).",
        "systemUUID": "System UUID reported by the node (SMBIOS).",
        "bootID": "Boot id; changes when the node reboots.",
        "kernelVersion": "Kernel version (uname -r).",
        "osImage": "Operating system image, e.g. 'Ubuntu 24.04 LTS'.",
        "containerRuntimeVersion": "Container runtime and its version, e.g. 'containerd://2.0.0'.",
        "kubeletVersion": "Kubelet version.",
        "kubeProxyVersion": "Deprecated: kube-proxy version (may be empty).",
        "operatingSystem": "Operating system, e.g. linux.",
        "architecture": "CPU architecture, e.g. amd64.",
    }
    node_info = obj(
        "Identity and versions of the node's software (all ten string fields are required).",
        {name: string(description) for name, description in info_fields.items()},
        list(info_fields),
        open=True,
    )
    return kind_schema(
        "",
        "v1",
        "Node",
        "A worker machine of the cluster; its kubelet reports capacity and health in the status.",
        {
            "spec": obj(
                "How the node is configured.",
                {
                    "podCIDR": string("Pod IP range assigned to the node."),
                    "podCIDRs": string_set("Pod IP ranges assigned to the node, one per IP family."),
                    "providerID": string("Id of the node in its cloud provider: <provider>://<id>."),
                    "unschedulable": boolean("Cordoned: no new pods are scheduled onto the node."),
                    "taints": atomic_list("Taints of the node; pods must tolerate them.", taint()),
                    "externalID": string("Deprecated."),
                    "configSource": free_object("Deprecated: dynamic kubelet configuration source."),
                },
                open=True,
            ),
            "status": obj(
                "Most recently observed state of the node.",
                {
                    "capacity": quantity_map("Total resources of the node: cpu, memory, pods, ephemeral-storage..."),
                    "allocatable": quantity_map("Resources available to pods (capacity minus reservations)."),
                    "phase": string("Deprecated: Pending, Running or Terminated."),
                    "conditions": keyed_list("Observations about the node, one per type.", node_condition, "type"),
                    "addresses": keyed_list("Addresses of the node.", address, "type"),
                    "daemonEndpoints": obj(
                        "Endpoints of daemons running on the node.",
                        {
                            "kubeletEndpoint": obj(
                                "The kubelet's endpoint.",
                                {"Port": integer("Port number.")},
                                ["Port"],
                            )
                        },
                        open=True,
                    ),
                    "nodeInfo": node_info,
                    "images": atomic_list("Container images on the node.", free_object("An image and its names.")),
                    "volumesInUse": string_list("Attachable volumes in use (mounted) on the node."),
                    "volumesAttached": atomic_list("Volumes attached to the node.", free_object("A volume.")),
                    "config": free_object("Status of the dynamic kubelet configuration (deprecated)."),
                    "runtimeHandlers": atomic_list(
                        "Runtime handlers the node offers.", free_object("A runtime handler.")
                    ),
                    "features": free_object("Features the node supports."),
                },
                open=True,
            ),
        },
    )
