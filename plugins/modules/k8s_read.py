#!/usr/bin/python
"""Read kinds of objects, and raw API paths, from one API server (read-only)."""

DOCUMENTATION = r"""
---
module: k8s_read
short_description: Read kinds of objects (and raw API paths) from one API server, read-only
description:
  - Runs on the host that runs kubectl for a cluster (a control-plane host, or the control machine for a managed
    control plane), through kubectl (plugins/module_utils/kube.py). Changes nothing; safe in check mode.
  - Asks the API server whether it is ready (C(/readyz)), then lists every object of each of O(resources) in every
    namespace, one C(kubectl get) each, and reads each of O(raw) (C(kubectl get --raw)). A kind the server does not
    serve (a CRD not installed, an API version removed) is said per resource (RV(resources.served) false), not an
    error.
  - Objects come back as kubectl gives them, without what no check reads (C(metadata.managedFields), the
    C(kubectl.kubernetes.io/last-applied-configuration) annotation, a node's image list).
  - The verify role reads nodes, DaemonSets, Deployments and MutatingWebhookConfigurations with it once per API
    server; DRA's ResourceSlices and DeviceClasses (C(resourceslices.resource.k8s.io)), or API discovery
    (O(raw) C(/apis)), are read the same way.
extends_documentation_fragment:
  - kgn.gpu_nodes.kubectl
options:
  resources:
    description: Resources as kubectl names them (V(nodes), V(daemonsets.apps), V(resourceslices.resource.k8s.io)).
    type: list
    elements: str
    default: []
  raw:
    description: API paths read with C(kubectl get --raw) (V(/apis), V(/version)); JSON answers are parsed.
    type: list
    elements: str
    default: []
  selector:
    description: A label selector applied to every resource listed.
    type: str
    default: ""
  field_selector:
    description: A field selector applied to every resource listed (V(spec.nodeName=gpu1) for one node's pods).
    type: str
    default: ""
author: kube-gpu-nodes
"""

EXAMPLES = r"""
- name: Read the nodes and the DRA objects of the cluster
  kgn.gpu_nodes.k8s_read:
    resources: [nodes, resourceslices.resource.k8s.io, deviceclasses.resource.k8s.io]
    raw: [/apis/resource.k8s.io]
    api_host: cp1
  delegate_to: cp1
  register: cluster
"""

RETURN = r"""
reachable:
  description: Whether the API server answered that it is ready.
  returned: always
  type: bool
error:
  description: Why it is not reachable (kubectl's first line, the host and the kubeconfig), else empty.
  returned: always
  type: str
api_host:
  description: The host kubectl ran on (empty for the control machine), as given.
  returned: always
  type: str
resources:
  description: Per resource, C(served) (false when the server does not serve the kind), C(items) (the objects) and
    C(error) (kubectl's words when the list failed otherwise).
  returned: always
  type: dict
raw:
  description: Per path, C(text), C(json) (when the answer parses) and C(error).
  returned: always
  type: dict
"""

import contextlib  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.api import slim  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.host import NodeModule  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.kube import CLIENT_ARGS, Kubectl, not_served  # noqa: E402


def resource_of(item):
    """The resource name (``daemonsets.apps``, ``nodes``) of a listed object, from its kind and apiVersion, the way
    kubectl guesses a plural (``UnsafeGuessKindToResource``: class -> classes, policy -> policies)."""
    kind = str(item.get("kind") or "").lower()
    plural = kind + "es" if kind.endswith("s") else kind[:-1] + "ies" if kind.endswith("y") else kind + "s"
    api_version = str(item.get("apiVersion") or "")
    return f"{plural}.{api_version.split('/')[0]}" if "/" in api_version else plural


def read_together(kube, resources, selector, field_selector):
    """Every resource in one ``kubectl get`` (one kubectl start instead of one each): ``{resource: answer}``, or None
    when that read fails for another reason (forbidden, ...) or shows an object it cannot place: then each is read
    on its own, which says which one. A resource the server does not serve is named by kubectl's error ("doesn't
    have a resource type"): it is said not served and the others are read again without it."""
    found, todo = {}, list(resources)
    while todo:
        try:
            listed = kube.get(todo, all_namespaces=True, selector=selector or None,
                              field_selector=field_selector or None)
        except KgnError as err:
            named = re.search(r'doesn\'t have a resource type "([^"]+)"', str(err))
            gone = [r for r in todo if named and r.split(".")[0] == named.group(1)]
            if not gone:
                return None
            found.update((r, {"served": False, "error": str(err), "items": []}) for r in gone)
            todo = [r for r in todo if r not in gone]
            continue
        placed = {resource: [] for resource in todo}
        for item in listed.get("items") or []:
            resource = resource_of(item)
            if resource not in placed:
                return None
            placed[resource].append(slim(item))
        found.update((r, {"served": True, "error": "", "items": items}) for r, items in placed.items())
        break
    return found


def read(kube, resources, raw, selector, field_selector=""):
    reachable, error = kube.ready()
    answer = {"reachable": reachable, "error": error, "resources": {}, "raw": {}}
    if not reachable:
        answer["server"] = kube.server()  # the address that did not answer, for the report
        return answer
    together = read_together(kube, resources, selector, field_selector) if len(resources) > 1 else None
    answer["resources"].update(together or {})
    for resource in resources if together is None else []:
        try:
            listed = kube.get(resource, all_namespaces=True, selector=selector or None,
                              field_selector=field_selector or None)
            answer["resources"][resource] = {"served": True, "error": "",
                                             "items": [slim(i) for i in listed.get("items") or []]}
        except KgnError as err:
            answer["resources"][resource] = {"served": not not_served(err), "error": str(err), "items": []}
    for path in raw:
        rc, out, err = kube.run(["get", "--raw", path])
        entry = {"text": out if rc == 0 else "", "error": "" if rc == 0 else kube.fail_words(["get", "--raw", path],
                                                                                              rc, out, err)}
        if rc == 0:
            with contextlib.suppress(ValueError):
                entry["json"] = json.loads(out)
        answer["raw"][path] = entry
    return answer


def main():
    module = NodeModule(
        argument_spec={
            **CLIENT_ARGS,
            "resources": {"type": "list", "elements": "str", "default": []},
            "raw": {"type": "list", "elements": "str", "default": []},
            "selector": {"type": "str", "default": ""},
            "field_selector": {"type": "str", "default": ""},
        },
        supports_check_mode=True,
    )
    p = module.params
    answer = read(Kubectl(module), p["resources"], p["raw"], p["selector"], p["field_selector"])
    module.exit_json(changed=False, api_host=p["api_host"], **answer)


if __name__ == "__main__":
    main()
