"""Answers of the Kubernetes API, read once per play and shared by every host of it."""

import json

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError

# What the roles read of a Node object.
_NODE_FIELDS = {
    "labels": ("metadata", "labels"),
    "annotations": ("metadata", "annotations"),
    "allocatable": ("status", "allocatable"),
    "capacity": ("status", "capacity"),
}
# What a read for verify leaves out of each object: bulky and never judged.
_SLIM_META = ("managedFields",)
_SLIM_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)


def _node_summary(node: dict, fields: list) -> dict:
    return {key: dict((node.get(_NODE_FIELDS[key][0]) or {}).get(_NODE_FIELDS[key][1]) or {}) for key in fields}


def slim(item: dict) -> dict:
    """An object as kubectl returned it, without what no check reads (managedFields, the last-applied annotation,
    a node's image list): what the k8s_read module returns."""
    item = dict(item)
    meta = dict(item.get("metadata") or {})
    for key in _SLIM_META:
        meta.pop(key, None)
    if meta.get("annotations"):
        meta["annotations"] = {k: v for k, v in meta["annotations"].items() if k not in _SLIM_ANNOTATIONS}
    item["metadata"] = meta
    if item.get("kind") == "Node" and isinstance(item.get("status"), dict):
        item["status"] = {k: v for k, v in item["status"].items() if k != "images"}
    return item


def api_answer(answers, api_host, kubeconfig=None):
    """The answer of ``api_host``'s API server ("" = the control machine) out of a k8s_read result, or out of the
    register of a k8s_read task looped over the API targets (``item.host`` names each; with ``kubeconfig``, the
    target's ``item.kubeconfig`` must be it too); None when not read."""
    if not answers:
        return None
    if not isinstance(answers, dict):
        raise KgnError("the API answer must be a k8s_read result or its looped register")
    if "results" not in answers:
        return answers
    for answer in answers["results"]:
        item = answer.get("item") if isinstance(answer, dict) else None
        if not isinstance(item, dict) or answer.get("skipped") or (item.get("host") or "") != (api_host or ""):
            continue
        if kubeconfig is None or item.get("kubeconfig") == kubeconfig:
            return answer
    return None


# Groups that say nothing about which cluster a host belongs to.
_NOT_A_CLUSTER = ("all", "ungrouped", "gpu_nodes", "kube_control_plane")


def api_host(host: object, groups: object, hostvars: object, kube_api_host: object = None) -> str:
    """The inventory host that runs kubectl for ``host``'s cluster, or "" when there is none.

    The one rule every role uses: the host's own ``kube_api_host`` when set; else a kube_control_plane
    host that shares a group with ``host`` (other than gpu_nodes, kube_control_plane, all and ungrouped;
    the smallest shared group wins, so a parent group spanning several clusters does not pick another
    cluster's control plane; the first control-plane host of that group in kube_control_plane order);
    else the first kube_control_plane host; else "" (a managed control plane: kubectl runs on the control
    machine with the inventory's kube_api_kubeconfig).

    ``kube_api_host``: the host's own kube_api_host as its play sees it ("" = not set), given by a caller that has
    it; None reads it from ``hostvars``. Ansible builds every variable of a host, its facts decoded and copied, for
    each ``hostvars[host]``, so a role passes its own value rather than have it read back.
    """
    name = "api_host"
    if not isinstance(host, str) or not host:
        raise KgnError(f"{name}: the input must be an inventory host name (inventory_hostname), got {host!r}")
    if not isinstance(groups, dict):
        raise KgnError(f"{name}: groups must be the inventory's groups (the magic variable groups), "
                       f"got {type(groups).__name__}")
    if not hasattr(hostvars, "get"):
        raise KgnError(f"{name}: hostvars must be the magic variable hostvars, got {type(hostvars).__name__}")
    if kube_api_host is None:
        # Ansible's hostvars answers .get() of a host outside the inventory with an undefined value, not None
        own = hostvars[host] if host in hostvars else {}  # noqa: SIM401
        kube_api_host = own.get("kube_api_host") if hasattr(own, "get") else None
    chosen = kube_api_host
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


def cluster_members(host: object, groups: object) -> list:
    """The hosts of ``host``'s cluster: its smallest group other than gpu_nodes, kube_control_plane, all and
    ungrouped (the group api_host picks the control plane from); every host when it has none."""
    if not isinstance(host, str) or not isinstance(groups, dict):
        raise KgnError("cluster_members: give an inventory host name and the magic variable groups")
    shared = sorted((len(members or []), index, list(members or []))
                    for index, (group, members) in enumerate(groups.items())
                    if group not in _NOT_A_CLUSTER and host in (members or []))
    if shared:
        return shared[0][2]
    return sorted({h for members in groups.values() for h in members or []})


def cluster_failures(host: object, groups: object, hostvars: object, play: object) -> list:
    """The other control-plane hosts of ``host``'s cluster that stopped in ``play`` (their ``kgn_run_failure``
    names it): the control planes of a cluster change one at a time, and the first failure stops the rest."""
    if not isinstance(play, str):
        raise KgnError(f"cluster_failures: play must be the play's name (ansible_play_name), got {play!r}")
    members = cluster_members(host, groups)
    found = []
    for other in groups.get("kube_control_plane") or []:
        if other == host or other not in members or other not in hostvars:
            continue
        failure = hostvars[other].get("kgn_run_failure") if hasattr(hostvars[other], "get") else None
        if isinstance(failure, dict) and failure.get("play") == play:
            found.append(other)
    return found


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


def json_answer(answer: object, what: str, key: str, kind: str) -> dict:
    """An API answer (text or parsed) whose ``key`` is a list, as a mapping; a KgnError names ``what`` answered
    otherwise (``kind``: what the answer should have been)."""
    if isinstance(answer, str):
        try:
            answer = json.loads(answer)
        except ValueError as exc:
            raise KgnError(f"{what} did not answer with JSON ({exc}): {answer[:200]!r}") from None
    if not isinstance(answer, dict) or not isinstance(answer.get(key), list):
        raise KgnError(f"{what} did not answer with {kind} (no '{key}')")
    return answer


def _parsed(answer: object, what: str) -> dict:
    answer = json_answer(answer, what, "items", "a list of objects")
    for item in answer["items"]:
        if not isinstance(item, dict) or not isinstance(item.get("metadata"), dict) or "name" not in item["metadata"]:
            raise KgnError(f"{what} answered with an object that has no metadata.name")
    return answer


def pods_using(answer: object, prefix: str = "nvidia.com/") -> list:
    """The pods of a ``kubectl get pods -o json`` answer (text or parsed) that are not finished and ask for a
    resource whose name starts with ``prefix`` (``nvidia.com/gpu``, ``nvidia.com/mig-1g.5gb`` ...) in a container's
    requests or limits, as sorted "namespace/name"."""
    if isinstance(answer, str):
        try:
            answer = json.loads(answer or "{}")
        except ValueError as err:
            raise KgnError(f"kubectl did not answer JSON ({err})") from None
    if not isinstance(answer, dict):
        raise KgnError("input must be the output of kubectl get pods -o json")
    found = []
    for pod in answer.get("items") or []:
        spec = pod.get("spec") or {}
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        containers = list(spec.get("containers") or []) + list(spec.get("initContainers") or [])
        for container in containers:
            resources = container.get("resources") or {}
            names = set(resources.get("requests") or {}) | set(resources.get("limits") or {})
            if any(str(n).startswith(prefix) for n in names):
                meta = pod.get("metadata") or {}
                found.append(f"{meta.get('namespace', 'default')}/{meta.get('name', '?')}")
                break
    return sorted(found)


def _selects(selector: dict, labels: dict) -> bool:
    """Whether a LabelSelector (matchLabels, matchExpressions) selects ``labels``; an empty selector selects all
    (https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#resources-that-support-set-based-requirements)."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression.get("key"), expression.get("operator"), expression.get("values") or []
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and key in labels and labels[key] in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
    return True


def blocking_budgets(pods: object, budgets: object) -> list:
    """The PodDisruptionBudgets that keep the pods of a node from being evicted: of ``budgets`` (``kubectl get
    poddisruptionbudgets -o json``), those in a pod's namespace whose selector selects it and that allow no
    disruption now (``status.disruptionsAllowed`` 0), each ``{budget, pods, allowed, current_healthy,
    desired_healthy}`` with ``budget`` and ``pods`` as "namespace/name" (the Eviction API refuses such an eviction
    with HTTP 429, https://kubernetes.io/docs/concepts/scheduling-eviction/api-eviction/)."""
    found = {}
    for budget in (budgets or {}).get("items") or []:
        meta, status = budget.get("metadata") or {}, budget.get("status") or {}
        if status.get("disruptionsAllowed", 0) > 0:
            continue
        selector = (budget.get("spec") or {}).get("selector")
        for pod in (pods or {}).get("items") or []:
            pod_meta = pod.get("metadata") or {}
            if (selector is None or pod_meta.get("namespace") != meta.get("namespace")
                    or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
                    or not _selects(selector, pod_meta.get("labels") or {})):
                continue
            name = f"{meta.get('namespace')}/{meta.get('name')}"
            entry = found.setdefault(name, {"budget": name, "pods": [], "allowed": status.get("disruptionsAllowed", 0),
                                            "current_healthy": status.get("currentHealthy"),
                                            "desired_healthy": status.get("desiredHealthy")})
            entry["pods"].append(f"{pod_meta.get('namespace')}/{pod_meta.get('name')}")
    return [found[k] for k in sorted(found)]
