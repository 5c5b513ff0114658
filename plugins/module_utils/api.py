"""Answers of the Kubernetes API, read once per play and shared by every host of it."""

import json

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError

# What the roles read of a Node object (gpu_node_labels: labels, annotations; gpu_node_verify: the rest).
# The kubectl options of the modules that talk to the API server (documented by the doc fragment
# kgn.gpu_nodes.kubectl).
KUBECTL_ARGS = {
    "kubectl": {"type": "str", "default": "kubectl"},
    "kubeconfig": {"type": "path", "default": "/etc/kubernetes/admin.conf"},
    "request_timeout": {"type": "int", "default": 10},
}
_NODE_FIELDS = {
    "labels": ("metadata", "labels"),
    "annotations": ("metadata", "annotations"),
    "allocatable": ("status", "allocatable"),
    "capacity": ("status", "capacity"),
}


def _node_summary(node: dict, fields: list) -> dict:
    return {key: dict((node.get(_NODE_FIELDS[key][0]) or {}).get(_NODE_FIELDS[key][1]) or {}) for key in fields}


def api_nodes(registered: object, fields: object = None) -> dict:
    """Index `kubectl get nodes -o json` answers (a looped command's register) by API host and node name."""
    name = "api_nodes"
    fields = list(_NODE_FIELDS) if fields is None else fields
    if not isinstance(fields, list) or not set(fields) <= set(_NODE_FIELDS):
        raise KgnError(f"{name}: fields {fields!r} must be a list of {', '.join(_NODE_FIELDS)}")
    results = registered.get("results") if isinstance(registered, dict) else registered
    if not isinstance(results, list):
        raise KgnError(
            f"{name}: input must be the register of a command looped over API hosts (a dict with 'results'), "
            f"not {type(registered).__name__}"
        )
    index: dict = {}
    for result in results:
        item = result.get("item") if isinstance(result, dict) else None
        if not (isinstance(item, str) or (isinstance(item, dict) and "host" in item)):
            raise KgnError(f"{name}: every result needs the loop item it ran for, the API host or a dict with 'host'")
        if result.get("skipped"):
            continue
        host = item if isinstance(item, str) else item["host"]
        error = ""
        nodes: dict = {}
        if result.get("unreachable") or result.get("rc", 1) != 0:
            error = (result.get("stderr") or result.get("msg") or f"kubectl exited {result.get('rc')}").strip()
            error = error.splitlines()[0] if error else ""
        else:
            try:
                items = json.loads(result.get("stdout") or "")["items"]
            except (ValueError, KeyError, TypeError) as exc:
                error = f"kubectl get nodes did not answer with a node list ({exc})"
            else:
                nodes = {item["metadata"]["name"]: _node_summary(item, fields) for item in items}
        index[host] = {"ok": not error, "error": error, "nodes": nodes}
    return index



# Groups that say nothing about which cluster a host belongs to.
_NOT_A_CLUSTER = ("all", "ungrouped", "gpu_nodes", "kube_control_plane")


def api_host(host: object, groups: object, hostvars: object) -> str:
    """The inventory host that runs kubectl for ``host``'s cluster, or "" when there is none.

    The one rule every role uses: the host's own ``kube_api_host`` when set; else a kube_control_plane
    host that shares a group with ``host`` (other than gpu_nodes, kube_control_plane, all and ungrouped;
    the smallest shared group wins, so a parent group spanning several clusters does not pick another
    cluster's control plane; the first control-plane host of that group in kube_control_plane order);
    else the first kube_control_plane host; else "" (a managed control plane: kubectl runs on the control
    machine with the inventory's kube_api_kubeconfig).
    """
    name = "api_host"
    if not isinstance(host, str) or not host:
        raise KgnError(f"{name}: the input must be an inventory host name (inventory_hostname), got {host!r}")
    if not isinstance(groups, dict):
        raise KgnError(f"{name}: groups must be the inventory's groups (the magic variable groups), "
                       f"got {type(groups).__name__}")
    if not hasattr(hostvars, "get"):
        raise KgnError(f"{name}: hostvars must be the magic variable hostvars, got {type(hostvars).__name__}")
    # Ansible's hostvars answers .get() of a host outside the inventory with an undefined value, not None
    own = hostvars[host] if host in hostvars else {}  # noqa: SIM401
    chosen = own.get("kube_api_host") if hasattr(own, "get") else None
    if chosen not in (None, ""):
        if not isinstance(chosen, str):
            raise KgnError(f"{name}: kube_api_host of {host} is {chosen!r}; set it to an inventory host name "
                           f"(a kube_control_plane host) or \"\" for the cluster's first control-plane host")
        return chosen
    control_planes = list(groups.get("kube_control_plane") or [])
    if not control_planes:
        return ""
    shared = [
        (len(members), index, members)
        for index, (group, members) in enumerate(groups.items())
        if group not in _NOT_A_CLUSTER and host in (members or [])
    ]
    for _, _, members in sorted(shared, key=lambda entry: entry[:2]):
        in_group = [cp for cp in control_planes if cp in members]
        if in_group:
            return in_group[0]
    return control_planes[0]


def node_list(answer: object) -> dict:
    """``{name: {labels, annotations}}`` of a ``kubectl get nodes -o json`` answer (text or parsed)."""
    doc = _parsed(answer, "kubectl get nodes")
    return {
        item["metadata"]["name"]: _node_summary(item, ["labels", "annotations"])
        for item in doc["items"]
    }


def api_objects(answer: object) -> list:
    """The objects of a ``kubectl get <kinds> -o json`` answer, each as ``{group, version, kind, namespace,
    name, labels}``, plus ``crd``: ``{group, plural, kind}`` for a CustomResourceDefinition; ``owners``
    (``["Kind/name"]``) and ``containers`` (``[{name, image, command, args}]``) for a DaemonSet; and
    ``device_plugin_enabled`` for the GPU Operator's ClusterPolicy (its ``spec.devicePlugin.enabled``,
    true unless set to false)."""
    doc = _parsed(answer, "kubectl get")
    found = []
    for item in doc["items"]:
        api_version = str(item.get("apiVersion") or "")
        group, _, version = api_version.rpartition("/")
        meta = item.get("metadata") or {}
        spec = item.get("spec") or {}
        entry = {
            "group": group,
            "version": version,
            "kind": str(item.get("kind") or ""),
            "namespace": str(meta.get("namespace") or ""),
            "name": str(meta.get("name") or ""),
            "labels": dict(meta.get("labels") or {}),
        }
        if entry["kind"] == "CustomResourceDefinition":
            entry["crd"] = {"group": str(spec.get("group") or ""),
                            "plural": str((spec.get("names") or {}).get("plural") or ""),
                            "kind": str((spec.get("names") or {}).get("kind") or "")}
        elif entry["kind"] == "DaemonSet":
            pod = (spec.get("template") or {}).get("spec") or {}
            entry["owners"] = [f"{o.get('kind')}/{o.get('name')}" for o in meta.get("ownerReferences") or []]
            entry["containers"] = [{"name": str(c.get("name") or ""), "image": str(c.get("image") or ""),
                                    "command": [str(w) for w in c.get("command") or []],
                                    "args": [str(w) for w in c.get("args") or []]}
                                   for c in pod.get("containers") or []]
        elif entry["kind"] == "ClusterPolicy" and group == "nvidia.com":
            entry["device_plugin_enabled"] = (spec.get("devicePlugin") or {}).get("enabled") is not False
        found.append(entry)
    return found


def _parsed(answer: object, what: str) -> dict:
    if isinstance(answer, str):
        try:
            answer = json.loads(answer)
        except ValueError as exc:
            raise KgnError(f"{what} did not answer with JSON ({exc}): {answer[:200]!r}") from None
    if not isinstance(answer, dict) or not isinstance(answer.get("items"), list):
        raise KgnError(f"{what} did not answer with a list of objects (no 'items')")
    for item in answer["items"]:
        if not isinstance(item, dict) or not isinstance(item.get("metadata"), dict) or "name" not in item["metadata"]:
            raise KgnError(f"{what} answered with an object that has no metadata.name")
    return answer
