#!/usr/bin/python
"""Write the GPU-sharing stack manifests, apply them, and remove what is no longer chosen."""

DOCUMENTATION = r"""
---
module: gpu_sharing_stacks
short_description: Write, apply and prune the GPU-sharing stack manifests on the host that runs kubectl
description:
  - Its action plugin plans on the controller, once (the stacks section of the host plan,
    P(kgn.gpu_nodes.stacks_plan#filter)), renders the templates that plan chose from the role's C(templates/) with
    the plan as their only input (V(plan)), and hands the module the plan and the manifests (relative path -> text).
    The module reads the host and the API and finishes that plan (the objects, what another device plugin already
    serves, what to remove) without planning it again, checking that the manifests are exactly the planned ones.
  - Called without O(plan) (the module alone), it plans from O(settings) itself.
  - Writes only the files that differ into O(settings.manifest_dir) (the old text is kept under
    C(<manifest_dir>/.backup/)), asks the API server whether it is ready (C(kubectl get --raw /readyz)) and applies
    every manifest with C(kubectl apply) (a change of a live object is repaired in the same run).
  - Prunes, after the apply, every object labelled C(app.kubernetes.io/managed-by=kube-gpu-nodes) that no planned
    manifest holds (the objects of a stack taken out of the list, of a variant no longer chosen, the second
    kube-scheduler, the samples), workloads first, CustomResourceDefinitions last, and removes the manifest files of
    what is no longer chosen. A Namespace is never removed (it may hold other things).
  - A CustomResourceDefinition is removed only when no custom object of it remains that this project did not
    create (deleting a CRD deletes its objects); else the module fails naming the objects and what to do, before
    anything is written, applied or deleted.
  - Before any change it lists every DaemonSet of the cluster and the GPU Operator's ClusterPolicies
    (C(clusterpolicies.nvidia.com); none when that CRD is not installed). An NVIDIA device plugin this project did not
    deploy (the GPU Operator's, a provider's managed add-on, one deployed by hand) while a chosen stack advertises the
    same resource (nvidia_device_plugin, C(nvidia.com/gpu)) or hands out the same GPUs (nvidia_dra) fails the module
    naming it and the choices, before anything is written, applied or deleted; with C(existing_device_plugin=adopt)
    in O(settings) that stack's own manifests are left out instead (never nvidia_dra's) and RV(msg) names the device
    plugin kept.
  - Reads the API server's discovery (C(kubectl get --raw /apis)) once; the resource.k8s.io version it serves decides
    whether nvidia_dra can be applied (refused, naming the feature gate and runtime-config to turn on, when the
    version rendered is not served), and which kinds are listed for pruning (DeviceClasses and ResourceClaimTemplates
    where resource.k8s.io is served, ValidatingAdmissionPolicies from Kubernetes 1.30).
  - When no API server answers (no kubectl, no kubeconfig, server down) or O(apply=false), the files are written,
    nothing is applied or removed in the cluster, and RV(msg) says C(NOT APPLIED) with the reason.
  - With O(render_dir) it contacts no host; it writes the manifests under
    C(<render_dir>/<render_host><manifest_dir>/) and the plan in C(_plan/stacks.json).
extends_documentation_fragment:
  - kgn.gpu_nodes.kubectl
  - kgn.gpu_nodes.render
options:
  settings:
    description:
      - The gpu_sharing_stacks settings, the input of the stacks plan; keys kubernetes_version, stacks, namespace,
        manifest_dir, device_plugin_release, images, registry_mirror, sharing, replicas, gpushare_mps,
        secondary_scheduler, secondary_scheduler_name, secondary_scheduler_image, control_plane_hosts, samples,
        existing_device_plugin, envvar_unprivileged,
        dra_compute_domains, dra_extended_resource, dra_feature_gates, dra_cdi_hook_path,
        dra_resource_api, dra_mig_layouts.
    type: dict
    required: true
  manifests:
    description:
      - The rendered manifests, relative path in the manifest folder (such as V(gpushare/extender-rbac.yml)) -> text.
      - The action plugin renders them when they are not given.
    type: dict
  plan:
    description:
      - The stacks plan without manifests (stacks_plan of O(settings)) the manifests were rendered from; the action
        plugin passes it.
    type: dict
  apply:
    description: Apply and prune through the API; when false the files are only written, and the result says why.
    type: bool
    default: true
notes:
  - Check mode writes nothing and applies and deletes with C(--dry-run=server); the result and RV(msg) list every
    file and object that would be removed. It reads the cluster the same way, so a device plugin already there is
    refused (or adopted) in check mode too.
author: kube-gpu-nodes
"""

EXAMPLES = r"""
- name: Write, apply and prune the stack manifests
  kgn.gpu_nodes.gpu_sharing_stacks:
    settings:
      kubernetes_version: "1.23.1"
      stacks: [gpushare]
      manifest_dir: /etc/kubernetes/kube-gpu-nodes/stacks
    kubeconfig: /etc/kubernetes/admin.conf
"""

RETURN = r"""
applied:
  description: Whether the manifests were applied (or, in check mode, dry-run applied) through the API.
  returned: always
  type: bool
msg:
  description: What happened, in words; starts with C(NOT APPLIED) when nothing reached the cluster, and lists removals.
  returned: always
  type: str
plan:
  description: >-
    The stacks section of the host plan (manifests, files, objects, remove_files, prune, adopted, assumed, ...).
  returned: always
  type: dict
observed:
  description: >-
    What the module read before any change (manifest files present, the API's labelled objects, every DaemonSet and
    ClusterPolicy of the cluster).
  returned: always
  type: dict
live:
  description: What the API showed at the end (labelled objects, planned objects missing, removed ones still there).
  returned: when applied and not in check mode
  type: dict
manifests:
  description: Per planned manifest, whether kubectl created or configured something, and its output.
  returned: when applied
  type: list
removed:
  description: The objects deleted (or, in check mode, that would be), as C(Kind namespace/name (stack)).
  returned: always
  type: list
removed_files:
  description: The manifest files removed (or, in check mode, that would be).
  returned: always
  type: list
changes:
  description: What this run changed, in words (manifests applied because their file changed, removals).
  returned: when not rendering
  type: list
repaired:
  description: Objects changed or deleted in the cluster since, put back by applying their unchanged manifest.
  returned: when not rendering
  type: list
ansible_facts:
  description: C(kgn_observed_stacks) (what was read) and C(kgn_state_stacks) (the plan without the manifests' text,
    what changed, C(changes), C(repaired)); also returned when the module fails after reading.
  returned: when not rendering
  type: dict
"""

import os  # noqa: E402

from ansible_collections.kgn.gpu_nodes.plugins.module_utils import change, host  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.api import api_objects  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.change import recorded  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.kube import (  # noqa: E402
    CLIENT_ARGS,
    Kubectl,
    first_line,
    not_served,
)
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.stacks.dra import served_groups  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.stacks.stacks import (  # noqa: E402
    MANAGED_BY,
    advertising_nvidia_gpu,
    finish_plan,
    pruned_resources,
    stacks_plan,
)

BACKUP = ".backup"
SELECTOR = ",".join(f"{key}={value}" for key, value in MANAGED_BY.items())


class ApplyFailed(Exception):
    """kubectl refused a manifest or a deletion."""


def manifest_files(folder):
    """Relative paths of the manifests in the folder (its .backup copies left out)."""
    found = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d != BACKUP)
        for name in sorted(files):
            if name.endswith((".yml", ".yaml")) and not name.startswith("."):
                found.append(os.path.relpath(os.path.join(root, name), folder))
    return found


def read_served(kube):
    """``{group: [versions]}`` the API server's discovery lists (``/apis``): which resource.k8s.io version the DRA
    objects may use, and which kinds can be listed for pruning."""
    rc, out, err = kube.run(["get", "--raw", "/apis"])
    if rc != 0:
        raise KgnError(f"reading the API server's discovery (/apis) failed: {first_line(rc, out, err)}")
    return served_groups(out)


def read_api(kube, kubernetes_version):
    """Whether the API server is ready, what its discovery serves, and every object labelled as this project's, with
    the custom objects of the project's CRDs."""
    ready, error = kube.ready()
    if not ready:
        return {"reachable": False, "error": error}
    try:
        served = read_served(kube)
    except KgnError as err_:
        return {"reachable": True, "error": str(err_), "objects": None}
    kinds = pruned_resources(kubernetes_version, served)
    rc, out, err = kube.run(["get", ",".join(kinds), "--all-namespaces", "-l", SELECTOR, "--output=json"])
    try:
        if rc != 0:
            raise KgnError(first_line(rc, out, err))
        objects = api_objects(out)
    except KgnError as err_:
        return {"reachable": True, "error": f"listing the project's objects failed: {err_}", "objects": None,
                "served": served}
    custom = {}
    for crd in (o for o in objects if o["kind"] == "CustomResourceDefinition" and o.get("crd")):
        resource = f"{crd['crd']['plural']}.{crd['crd']['group']}"
        rc, out, err = kube.run(["get", resource, "--all-namespaces", "--output=json"])
        try:
            if rc != 0:
                raise KgnError(first_line(rc, out, err))
            custom[crd["name"]] = {"objects": api_objects(out), "error": ""}
        except KgnError as err_:
            custom[crd["name"]] = {"objects": [], "error": str(err_)}
    return {"reachable": True, "error": "", "objects": objects, "custom_objects": custom, "served": served}


def read_components(kube):
    """Every DaemonSet of the cluster and the GPU Operator's ClusterPolicies (none when its CRD is not installed):
    where another device plugin would show."""
    found = {}
    for key, args in (("daemonsets", ["get", "daemonsets.apps", "--all-namespaces", "--output=json"]),
                      ("cluster_policies", ["get", "clusterpolicies.nvidia.com", "--output=json"])):
        rc, out, err = kube.run(args)
        if key == "cluster_policies" and rc != 0 and not_served(err):
            found[key] = []
            continue
        try:
            if rc != 0:
                raise KgnError(first_line(rc, out, err))
            found[key] = api_objects(out)
        except KgnError as err_:
            return {"error": f"`kubectl {' '.join(args[:2])}` failed: {err_}"}
    return dict(found, error="")


def observe(kube, p, manifest_dir):
    observed = {"files": manifest_files(manifest_dir),
                "api": {"reachable": None, "error": "apply is disabled (gpu_sharing_stacks_apply_enabled: false)"}}
    if p["apply"]:
        observed["api"] = read_api(kube, p["settings"].get("kubernetes_version"))
        # only a stack that advertises what every NVIDIA device plugin advertises can meet another one
        if observed["api"]["reachable"] and advertising_nvidia_gpu(p["settings"].get("stacks")):
            observed["api"]["components"] = read_components(kube)
    return observed


def _resource(obj):
    kind = obj["kind"].lower()
    return f"{kind}.{obj['group']}" if obj["group"] else kind


def _shown(obj):
    where = f"{obj['namespace']}/" if obj.get("namespace") else ""
    return f"{obj['kind']} {where}{obj['name']}" + (f" ({obj['stack']})" if obj.get("stack") else "")


def apply_manifests(kube, p, plan, observed, check):
    # a server dry run cannot know the kinds of a CRD this run creates: those custom objects are not dry-run
    live_crds = {o["name"] for o in observed["api"].get("objects") or [] if o["kind"] == "CustomResourceDefinition"}
    new_groups = {o["name"].split(".", 1)[1] for o in plan["objects"]
                  if o["kind"] == "CustomResourceDefinition" and o["name"] not in live_crds}
    results = []
    for m in plan["manifests"]:
        path = f"{plan['manifest_dir']}/{m['path']}"
        if check and any(o["group"] in new_groups for o in plan["objects"] if o["path"] == m["path"]):
            results.append({"path": m["path"], "output": [], "changed": True, "skipped": True})
            continue
        args = ["apply", f"--dry-run={'server' if check else 'none'}", "-f", "-" if check else path]
        rc, out, err = kube.run(args, data=p["manifests"][m["path"]] if check else None)
        if rc != 0:
            raise ApplyFailed(f"kubectl apply -f {path} failed: {(err or out).strip()[:600]}")
        lines = out.strip().splitlines()
        results.append({"path": m["path"], "output": lines,
                        "changed": any(" created" in line or " configured" in line for line in lines)})
    return results


def prune(kube, plan, check):
    for obj in plan["prune"]:
        args = ["delete", f"{_resource(obj)}/{obj['name']}", "--ignore-not-found", "--timeout=60s",
                f"--dry-run={'server' if check else 'none'}"]
        if obj["namespace"]:
            args += ["--namespace", obj["namespace"]]
        rc, out, err = kube.run(args)
        if rc != 0:
            raise ApplyFailed(f"kubectl delete {_resource(obj)}/{obj['name']} failed: {(err or out).strip()[:600]}")


def write_files(todo, manifest_dir):
    """Back up (under .backup/<folder>) and write or remove each pending file; remove emptied folders."""
    by_folder = {}
    for item in todo:
        by_folder.setdefault(os.path.dirname(os.path.relpath(item["path"], manifest_dir)), []).append(item)
    for folder, items in sorted(by_folder.items()):
        change.write(items, backup_dir=os.path.join(manifest_dir, BACKUP, folder))
        target = os.path.join(manifest_dir, folder)
        if folder and os.path.isdir(target) and not os.listdir(target):
            os.rmdir(target)


def live_state(kube, plan, api=None):
    """What the API shows of the plan's objects; ``api``: a read of this run that nothing has changed since."""
    api = api or read_api(kube, plan.get("kubernetes_version"))
    if not api.get("reachable") or api.get("objects") is None:
        return {"reachable": bool(api.get("reachable")), "error": api.get("error"), "missing": [], "left": []}
    seen = {(o["group"], o["kind"], o["namespace"], o["name"]) for o in api["objects"]}
    seen |= {(o["group"], o["kind"], o["namespace"], o["name"])
             for listed in api["custom_objects"].values() for o in listed["objects"]}
    # every planned object carries the project's labels, so the labelled list shows it (a Namespace is not listed)
    missing = [_shown(o) for o in plan["objects"]
               if o["kind"] != "Namespace" and (o["group"], o["kind"], o["namespace"], o["name"]) not in seen]
    left = [_shown(o) for o in plan["prune"] if (o["group"], o["kind"], o["namespace"], o["name"]) in seen]
    return {"reachable": True, "error": "", "objects": [_shown(dict(o, stack="")) for o in api["objects"]],
            "missing": missing, "left": left}


def _removal_diff(plan):
    return [{"before_header": _shown(o), "after_header": f"{_shown(o)} (deleted)", "before": "exists\n", "after": ""}
            for o in plan["prune"]]


def _summary(plan, applied, reason, results, removed_files, check):
    would = "would be " if check else ""
    sentences = []
    if applied and not results:
        sentences.append("Nothing to apply" if plan["stacks"] else "No stack is chosen: nothing to apply")
    elif applied:
        changed = [r["path"] for r in results if r["changed"]]
        skipped = [r["path"] for r in results if r.get("skipped")]
        changes = f", {len(changed)} {would}changed ({', '.join(changed)})" if changed else ", all unchanged"
        sentences.append(f"{'Server dry run: ' if check else ''}{len(results)} manifest(s) applied{changes}")
        if skipped:
            sentences.append(f"Not dry-run (their CRD is created by this run): {', '.join(skipped)}")
    else:
        sentences.append(f"NOT APPLIED: the manifests are {'(would be) ' if check else ''}written to "
                         f"{plan['manifest_dir']}, but {reason}. Nothing in the cluster was applied or removed; apply "
                         f"them later with kubectl apply -f, or fix gpu_sharing_stacks_kubectl / "
                         f"gpu_sharing_stacks_kubeconfig")
    for adopted in plan["adopted"]:
        sentences.append(f"Adopted (gpu_sharing_stacks_existing_device_plugin: adopt): {adopted['stack']} is not "
                         f"deployed, {adopted['resource']} stays with {'; '.join(adopted['found'])}")
    if plan["prune"] and applied:
        sentences.append(f"Objects {would}removed (no longer chosen): " + "; ".join(_shown(o) for o in plan["prune"]))
    if removed_files:
        sentences.append(f"Manifest files {would}removed: " + ", ".join(removed_files))
    return ". ".join(sentences) + "."


def what_changed(plan, results, todo, gone, applied, check):
    """``(changes, repaired)`` in words. A manifest whose file this run wrote is a change (a first install, what
    the inventory asks for anew); an object kubectl had to create or configure while its manifest file was already
    as planned was changed or deleted in the cluster since: a repair. Removals are changes."""
    written = {item["path"] for item in todo}
    would = "would be " if check else ""
    changes, repaired = [], []
    for r in results:
        if not r["changed"] or r.get("skipped"):
            continue
        what = "; ".join(line for line in r["output"] if " created" in line or " configured" in line) or r["path"]
        if f"{plan['manifest_dir']}/{r['path']}" in written:
            changes.append(f"{would}applied {r['path']}: {what}")
        else:
            repaired.append(f"{would}re-applied {r['path']} (changed or deleted in the cluster): {what}")
    changes += [f"{would}removed from the cluster (no longer chosen): {_shown(o)}" for o in plan["prune"]] \
        if applied else []
    changes += [f"manifest file {would}removed: {item['path']}" for item in gone]
    return changes, repaired


def _slim(plan):
    """The plan as verify and the report read it (kgn_state_stacks): without the manifests' text."""
    keep = ("kubernetes_version", "stacks", "namespace", "manifest_dir", "manifests", "adopted", "prune",
            "remove_files", "assumed", "secondary", "hami")
    slim = {key: plan.get(key) for key in keep}
    # what the DRA checks expect of the cluster (checks_dra.expected): the API version and the compute domains part
    slim["dra"] = {key: (plan.get("dra") or {}).get(key) for key in ("enabled", "resource_api", "compute_domains")}
    return slim


def main():
    module = host.NodeModule(
        argument_spec={
            **CLIENT_ARGS,
            "settings": {"type": "dict", "required": True},
            "manifests": {"type": "dict"},
            "plan": {"type": "dict"},
            "apply": {"type": "bool", "default": True},
            "render_dir": {"type": "path"},
            "render_host": {"type": "str"},
        },
        required_together=[("render_dir", "render_host")],
        supports_check_mode=True,
    )
    p = module.params
    if p["manifests"] is None:
        module.fail_json(msg="k8s_manifests: no manifests given; call it through its action plugin (a task in a play), "
                             "which renders them from the plan, or pass manifests")
    inputs = dict(p["settings"], manifests=p["manifests"])
    rendering = bool(p["render_dir"])
    manifest_dir = str((p["plan"] or inputs).get("manifest_dir") or "/etc/kubernetes/kube-gpu-nodes/stacks").rstrip("/")
    kube = Kubectl(module)
    observed = {}
    try:
        if not rendering:
            observed = observe(kube, p, manifest_dir)  # a bad stack list is refused like the plan's refusals
        if p["plan"] is not None:
            plan = finish_plan(p["plan"], p["manifests"], observed)  # planned once, by the action plugin
        else:
            plan = stacks_plan(inputs, observed or {})
    except KgnError as err:
        msg = str(err)
        module.fail_json(msg=msg if "Nothing was changed" in msg else f"{msg}. Nothing was changed.",
                         observed=observed)
    if rendering:
        written = change.render(p["render_dir"], p["render_host"], plan["files"], plan, "stacks")
        host.say(module, assumed=plan.get("assumed") or [])
        module.exit_json(changed=bool(written), applied=False, msg="rendered", plan=plan, observed=observed,
                         removed=[], removed_files=[])

    todo = change.pending(plan["files"])
    gone = change.pending([{"path": path, "content": None} for path in plan["remove_files"]])
    diff = change.diff(todo + gone)
    linked = change.links(todo + gone, module.check_mode)  # symlinked files, written through: msg and changes
    api = observed["api"]
    applied = bool(api.get("reachable"))
    reason = api.get("error") or ""
    result = {"plan": plan, "observed": observed, "removed_files": [g["path"] for g in gone],
              "removed": [_shown(o) for o in plan["prune"]] if applied else []}

    def facts(changed, results, live=None):
        changes, repaired = what_changed(plan, results, todo, gone, applied, module.check_mode)
        return recorded("stacks", observed, _slim(plan), live or {}, changed, module.check_mode,
                        [] if module.check_mode else repaired, [] if module.check_mode else changes + linked)

    if api.get("reachable") and api.get("objects") is None:
        reason = api["error"]
    if not module.check_mode and (todo or gone):
        try:
            write_files(todo + gone, manifest_dir)
        except change.ChangeFailed as err:
            module.fail_json(msg=f"Writing the manifests to {manifest_dir} failed: {err}", diff=diff,
                             ansible_facts=facts(False, []), **result)
    results = []
    if applied:
        try:
            results = apply_manifests(kube, p, plan, observed, module.check_mode)
            prune(kube, plan, module.check_mode)
        except ApplyFailed as err:
            module.fail_json(msg=f"{err}. The manifest files are written to {manifest_dir}; fix the cause and run "
                                 f"again.", changed=bool(todo or gone), diff=diff, manifests=results,
                             ansible_facts=facts(bool(todo or gone), results), **result)
    diff += _removal_diff(plan) if applied else []
    changed = bool(todo or gone or any(r["changed"] for r in results) or (applied and plan["prune"]))
    msg = _summary(plan, applied, reason, results, result["removed_files"], module.check_mode)
    msg += "".join(f" {words}." for words in linked)
    if applied and reason:
        msg += f" Nothing was removed from the cluster: {reason}."
    if applied and not module.check_mode:
        # nothing applied or deleted: the API read before is what it shows now (no second read)
        result["live"] = live_state(kube, plan, None if changed else api)
        problems = result["live"]["missing"] + [f"{o} is still there" for o in result["live"]["left"]]
        if problems:
            module.fail_json(msg=f"kubectl applied and deleted without an error, but the API does not show it: "
                                 f"missing {', '.join(result['live']['missing']) or 'nothing'}; "
                                 f"{', '.join(result['live']['left']) or 'no removed object'} still there.",
                             changed=changed, diff=diff, manifests=results,
                             ansible_facts=facts(changed, results, result["live"]), **result)
    result["ansible_facts"] = facts(changed, results, result.get("live"))
    state = result["ansible_facts"]["kgn_state_stacks"]
    host.say(module, repaired=state["repaired"])
    module.exit_json(changed=changed, applied=applied, reason=reason, msg=msg, diff=diff, manifests=results,
                     changes=state["changes"], repaired=state["repaired"], **result)


if __name__ == "__main__":
    main()
