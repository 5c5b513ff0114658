"""Verification of one host: what it shows, what it should show, the checks, the diagnosis, the report row.

``verify_host`` is the one entry point (the gpu_node_verify action plugin calls it for every host it verifies, the
report for a host that stopped earlier in the run, with what that host gathered). Its inputs:

* the recorded states: each concern's module recorded its plan and what it saw live (``kgn_state_<concern>``: the
  apply run of site.yml, or the check-mode refresh of playbooks/verify.yml); nothing is decided again here;
* the probe: what the gpu_node_verify module read live on the host (PCI GPUs, kernel modules, Secure Boot, device
  plugin sockets, containerd's backups, the scheduler config's extenders and whether they answer, kube-proxy), or
  None when the host was not reached;
* the API's answer (the k8s_read module's, once per API server): the node, the DaemonSets, Deployments and mutating
  webhooks;
* the pod smoke's result (the gpu_pod_smoke module's, run on the node's API host), or None when it did not run; the
  engine smoke's is in the probe (``engine_smoke``);
* the host's settings (the gpu_node_verify role's inputs) and the stack catalog (stacks.py): sockets, arguments,
  resources, labels, a stack's own scheduler.

The checks are registered in checks_*.py (imported below, in report order).
"""

from urllib.parse import urlsplit

# Importing the check modules registers their checks; this order is their order in the report.
# isort: off
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.verify import checks_run  # noqa: F401
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.verify import checks_node  # noqa: F401
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.verify import checks_runtime  # noqa: F401
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.verify import checks_cluster  # noqa: F401
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.verify import checks_dra
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.verify import checks_smoke  # noqa: F401
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.verify import checks_control_plane  # noqa: F401
# isort: on
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.mig import mig
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.report import report_row
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.smoke import smoke
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.stacks import stacks as catalog
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.verify.checks import diagnose, run_checks, verdict

MISSING = "no recorded state: the concern's play did not run on this host in this run (see the host's error)"
# The concerns whose recorded state (kgn_state_<concern>) verify and the report read.
CONCERNS = ("nvidia_driver", "nvidia_mig", "nvidia_container_toolkit", "container_runtime", "kube_scheduler",
            "node_labels", "stacks")


def _state(states, concern):
    state = (states or {}).get(concern)
    return state if isinstance(state, dict) and state.get("plan") is not None else {}


def _flags(argv):
    """{flag: value} of an argument list (--a=b and --a b)."""
    flags = {}
    i = 0
    argv = list(argv or [])
    while i < len(argv):
        arg = str(argv[i])
        if arg.startswith("--"):
            if "=" in arg:
                key, value = arg[2:].split("=", 1)
            elif i + 1 < len(argv) and not str(argv[i + 1]).startswith("-"):
                key, value = arg[2:], str(argv[i + 1])
                i += 1
            else:
                key, value = arg[2:], "true"
            flags[key] = value.strip("\"'")
        i += 1
    return flags


def _gpu(state, probe):
    plan, live = state.get("plan") or {}, state.get("live") or {}
    gpu = live.get("gpu") or {}
    probe = probe or {}
    devices = probe.get("pci_devices") or []
    package = plan.get("version_package") or ""
    smi = live.get("nvidia_smi") or {}
    return {
        "read": bool(probe) or bool(state),
        "state_read": bool(state),
        "present": bool(devices) or bool(gpu.get("gpu_present")),
        "pci_devices": devices,
        "modules": probe.get("modules") or {},
        "kernel_driver_version": live.get("kernel_module_version"),
        "package_name": package or None,
        "adopted": plan.get("adopted"),
        "package_version": (live.get("packages") or {}).get(package),
        # what the driver plan warned of: an OS or driver branch past its end of life, a kernel without the module
        "support_warnings": [str(w) for w in plan.get("warnings") or []],
        "secure_boot": probe.get("secure_boot"),
        "smi": {
            "found": bool(smi.get("path")),
            "rc": 0 if smi.get("answered") else 1,
            "error": "" if smi.get("answered") else (smi.get("reason") or MISSING if not state else smi.get("reason")),
            "gpus": [{"name": g.get("product_name"), "driver_version": gpu.get("driver_version"),
                      "memory_total_mib": g.get("memory_total_mib")} for g in gpu.get("gpus") or []]
            if smi.get("answered") else [],
            "cuda_version": gpu.get("cuda_version") or "",
        },
    }


def _runtime(state, toolkit, probe):
    plan, live = state.get("plan") or {}, state.get("live") or {}
    engine = plan.get("engine") or "none"
    if not state:
        return {"engine": "none", "requested": None, "installed": {}, "state_missing": True}
    config = next((f["path"] for f in plan.get("files") or [] if f.get("path", "").endswith(("config.toml",
                                                                                              "daemon.json"))), "")
    binary = live.get("binary") or {}
    detail = {
        "answered": bool(live.get("answered")),
        "active": bool(live.get("active")),
        "service": live.get("service") or "",
        "error": live.get("error") or ("" if live.get("active") else f"{plan.get('service')} is not running"),
        "default_runtime": live.get("default_runtime") or "",
        "runtimes": list(live.get("runtimes") or []),
        "config_path": config,
        "backup_mentions_nvidia": (probe or {}).get("containerd_backup_mentions_nvidia"),
        # our drop-in is on disk but the main config no longer imports it
        "dropin": live.get("dropin") or "",
        "dropin_orphaned": bool(live.get("dropin_orphaned")),
        # a file of the node read after ours that decides the default runtime ({path, key, value, ours, config})
        "default_set_by": dict(live.get("default_set_by") or {}),
        "stale_files": list(live.get("stale_files") or []),
        "binary": binary,
        # CDI mode: the rows module_utils/runtime/cdi.py made of the spec, the driver, the paths and the engine
        "runtime_mode": live.get("runtime_mode") or plan.get("runtime_mode") or "",
        "cdi_rows": list((live.get("cdi") or {}).get("rows") or []),
    }
    return {
        "engine": engine,
        "requested": None,
        "installed": dict(plan.get("versions") or {}),
        engine: detail,
        "toolkit_installed": bool(binary.get("exists")) or bool((toolkit.get("live") or {}).get("binary")),
    }


def _scheduler(state, probe):
    plan, live = state.get("plan") or {}, state.get("live") or {}
    network = (probe or {}).get("scheduler")
    return {
        "process": {"running": bool(live.get("pid")), "pid": live.get("pid"),
                    "flags": _flags((live.get("argv") or [])[1:])},
        # what the manifest or the unit with its drop-ins says now (the scheduler reads it at its next start)
        "persisted": {"style": plan.get("style") or "unknown", "path": plan.get("manifest") or plan.get("dropin") or "",
                      "flags": _flags((live.get("persisted_argv") or plan.get("current_argv") or [])[1:])},
        # None: not read (the host was not reached)
        "config": None if network is None else network.get("config") or {},
        "health": {"url": live.get("health_url") or plan.get("health_url") or "",
                   "status": 200 if live.get("healthy") else None,
                   "body": "ok" if live.get("healthy") else "",
                   "error": "" if live.get("healthy") else (live.get("health") or MISSING)},
        "extenders": (network or {}).get("extenders") or [],
        "kube_proxy_mode": (network or {}).get("kube_proxy_mode"),
        "route_localnet": (network or {}).get("route_localnet"),
        "problems": list(live.get("problems") or []),
    }


def _mig(state):
    """The MIG layout the nvidia_mig module recorded: its plan (layout, wanted state per GPU) and the live layout
    per GPU it read last; what still differs from the plan is in ``problems``."""
    if not state:
        return {"recorded": False}
    plan, live = state.get("plan") or {}, state.get("live") or {}
    gpus = list(live.get("gpus") or [])
    return {"recorded": True, "managed": bool(plan.get("managed")), "layout": plan.get("layout", ""),
            "gpus": [{"index": g.get("index"), "mig": bool(g.get("mig")), "pending": bool(g.get("pending")),
                      "profiles": list(g.get("profiles") or []),
                      "layout": mig.describe(bool(g.get("mig")), list(g.get("profiles") or []))} for g in gpus],
            "problems": mig.live_problems(plan, gpus) if plan.get("managed") else []}


def _daemonsets(items):
    """DaemonSet objects -> [{name, namespace, args, desired, ready}]."""
    result = []
    for item in items:
        if not isinstance(item, dict):
            continue
        meta = item.get("metadata") or {}
        pod = ((item.get("spec") or {}).get("template") or {}).get("spec") or {}
        args = []
        for container in pod.get("containers") or []:
            args += [str(a) for a in (container.get("command") or []) + (container.get("args") or [])]
        status = item.get("status") or {}
        result.append({"name": meta.get("name"), "namespace": meta.get("namespace"), "args": args,
                       "desired": status.get("desiredNumberScheduled", 0), "ready": status.get("numberReady", 0),
                       "managed": all((meta.get("labels") or {}).get(k) == v for k, v in catalog.MANAGED_BY.items())})
    return result


def _words(text, limit=300):
    text = " ".join(str(text or "").split())
    return text if len(text) <= limit else text[: limit - 3].rsplit(" ", 1)[0] + " ..."


def _waiting(pod):
    """Why each container of a pod does not run: [{container, image, reason, message}] (containerStatuses'
    waiting or terminated state; a pod not scheduled yet has none: its PodScheduled condition says why)."""
    status = pod.get("status") or {}
    found = []
    for entry in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        state = entry.get("state") or {}
        detail = state.get("waiting") or state.get("terminated")
        if detail and detail.get("reason") != "Completed":
            found.append({"container": entry.get("name"), "image": entry.get("image"),
                          "reason": detail.get("reason") or "", "message": _words(detail.get("message"))})
    if not found:
        for condition in status.get("conditions") or []:
            if condition.get("type") == "PodScheduled" and condition.get("status") != "True":
                found.append({"container": "", "image": "", "reason": condition.get("reason") or "",
                              "message": _words(condition.get("message"))})
    return found


def _stack_pods_not_running(raw, node_name, daemonsets):
    """The pods of the project's own DaemonSets on ``node_name`` that do not run (phase not Running or Succeeded):
    ``[{name, namespace, daemonset, phase, waiting}]``; None when the pods could not be read."""
    entry = (raw or {}).get(NOT_RUNNING_PODS) or {}
    if "json" not in entry:
        return None
    managed = {(d["namespace"], d["name"]) for d in daemonsets if d.get("managed")}
    found = []
    for pod in (entry["json"] or {}).get("items") or []:
        meta = pod.get("metadata") or {}
        owner = next((o.get("name") for o in meta.get("ownerReferences") or [] if o.get("kind") == "DaemonSet"), None)
        if (pod.get("spec") or {}).get("nodeName") != node_name or (meta.get("namespace"), owner) not in managed:
            continue
        found.append({"name": meta.get("name"), "namespace": meta.get("namespace"), "daemonset": owner,
                      "phase": (pod.get("status") or {}).get("phase") or "", "waiting": _waiting(pod)})
    return sorted(found, key=lambda p: (p["namespace"], p["name"]))


def _deployments(items):
    """Deployment objects -> [{name, namespace, desired, ready}]."""
    return [{"name": (i.get("metadata") or {}).get("name"), "namespace": (i.get("metadata") or {}).get("namespace"),
             "desired": (i.get("spec") or {}).get("replicas", 1),
             "ready": (i.get("status") or {}).get("readyReplicas", 0)}
            for i in items if isinstance(i, dict)]


def _webhooks(items):
    """MutatingWebhookConfiguration objects -> [{name, webhooks: [{name, service, ca_bundle}]}]."""
    result = []
    for item in items:
        if not isinstance(item, dict):
            continue
        hooks = []
        for hook in item.get("webhooks") or []:
            client = hook.get("clientConfig") or {}
            service = client.get("service") or {}
            where = (f"{service.get('namespace')}/{service.get('name')}:{service.get('port', 443)}"
                     f"{service.get('path') or ''}" if service else client.get("url") or "")
            hooks.append({"name": hook.get("name"), "service": where, "ca_bundle": bool(client.get("caBundle"))})
        result.append({"name": (item.get("metadata") or {}).get("name"), "webhooks": hooks})
    return result


# What verify reads of the API, once per API server (the k8s_read module's resources; a kind the server does not
# serve, such as resource.k8s.io's on a cluster without DRA, is said per kind, never a failed read).
API_RESOURCES = ("nodes", "daemonsets.apps", "deployments.apps",
                 "mutatingwebhookconfigurations.admissionregistration.k8s.io", *checks_dra.API_RESOURCES)
# ... and the pods that do not run (phase neither Running nor Succeeded), by a field selector the API server applies,
# so a large cluster's running pods are never read: a stack pod whose image cannot be pulled is named on its node.
NOT_RUNNING_PODS = "/api/v1/pods?fieldSelector=status.phase%21%3DRunning%2Cstatus.phase%21%3DSucceeded"
API_RAW = (NOT_RUNNING_PODS,)


def api_view(answer, node_name):
    """The k8s_read answer of the host's API server, as the checks read it: ``{reachable, error, node_name, node
    ({labels, annotations, allocatable} or None), daemonsets, deployments, webhooks}``; ``answer`` None or
    empty: no API was read. An API that was asked and did not answer has ``read`` true, and ``server``, the
    address its kubeconfig names."""
    if not answer:
        return {"reachable": False, "error": "", "node_name": node_name}
    if not isinstance(answer, dict):
        raise KgnError("verify: the API answer must be the k8s_read module's result")
    if answer.get("unreachable") or answer.get("failed"):
        return {"reachable": False, "node_name": node_name, "read": True, "server": "",
                "error": " ".join(str(answer.get("msg") or "the API host could not run kubectl").split())[:300]}
    if not answer.get("reachable"):
        return {"reachable": False, "error": answer.get("error") or "", "node_name": node_name, "read": True,
                "server": answer.get("server") or ""}
    listed = answer.get("resources") or {}

    def items(resource):
        return (listed.get(resource) or {}).get("items") or []

    node = next((n for n in items("nodes") if (n.get("metadata") or {}).get("name") == node_name), None)
    daemonsets = _daemonsets(items("daemonsets.apps"))
    return {
        "reachable": True, "error": "", "node_name": node_name,
        "node": None if node is None else {"labels": dict((node.get("metadata") or {}).get("labels") or {}),
                                           "annotations": dict((node.get("metadata") or {}).get("annotations") or {}),
                                           "allocatable": dict((node.get("status") or {}).get("allocatable") or {})},
        "daemonsets": daemonsets,
        "stack_pods_not_running": _stack_pods_not_running(answer.get("raw"), node_name, daemonsets),
        "deployments": _deployments(items("deployments.apps")),
        "webhooks": _webhooks(items("mutatingwebhookconfigurations.admissionregistration.k8s.io")),
        "dra": checks_dra.api_part(listed),
    }


def _smoke(result):
    """A smoke's result (``status`` and ``summary``), or None when it did not run (off, a task Ansible skipped)."""
    return dict(result) if isinstance(result, dict) and "status" in result and "summary" in result else None


def verify_observed(probe, states, api=None, run_failure=None, pod_smoke=None):
    """What one host shows, in the shape the checks read: ``{gpu, runtime, device_plugin, mig, scheduler, api,
    run_failure, smoke}`` from the probe (the gpu_node_verify module's ``observed``; None when the host was not
    reached), the recorded states (``{concern: kgn_state_<concern>}``), the API (``api_view``) and the pod smoke's
    result. ``run_failure``: why the host stopped earlier in the run (``{play, task, msg, unreachable}``; ``{}`` when
    unknown), else None."""
    if (probe is not None and not isinstance(probe, dict)) or not isinstance(states or {}, dict):
        raise KgnError("verify_observed: the probe's observed and the states must be mappings")
    states = states or {}
    observed = {"api": api or {}, "run_failure": run_failure}
    observed["gpu"] = _gpu(_state(states, "nvidia_driver"), probe)
    observed["runtime"] = _runtime(_state(states, "container_runtime"), _state(states, "nvidia_container_toolkit"),
                                   probe)
    observed["device_plugin"] = None if probe is None else probe.get("device_plugin") or {}
    observed["mig"] = _mig(_state(states, "nvidia_mig"))
    observed["scheduler"] = _scheduler(_state(states, "kube_scheduler"), probe)
    observed["smoke"] = {"engine": _smoke((probe or {}).get("engine_smoke")), "pod": _smoke(pod_smoke)}
    isolation = (probe or {}).get("isolation_probe")
    observed["smoke"]["isolation"] = dict(isolation) if isinstance(isolation, dict) and "status" in isolation else None
    return observed


def verify_expected(settings, states):
    """What one host should show: ``settings`` are the verify role's inputs (host, kinds, stacks, expect_gpu,
    waived, driver_version, extra_labels, labels_require_gpu, mig_layout, check_mode: whether the run is a check as
    a whole, engine_smoke and pod_smoke: whether the smokes are on); what each stack brings comes from the stack
    catalog; the scheduler's variant, config file, flag, health URL and extenders from its recorded plan."""
    if not isinstance(settings, dict):
        raise KgnError("verify_expected: settings must be a mapping")
    states = states or {}
    stacks = list(settings.get("stacks") or [])
    entries = catalog.stack_catalog(stacks)
    kinds = list(settings.get("kinds") or [])
    labels = {}
    for entry in entries.values():
        labels.update(entry.get("node_labels") or {})
    labels.update(settings.get("extra_labels") or {})
    control_plane = "control_plane" in kinds
    expected = {
        "host": settings.get("host"),
        "kinds": kinds,
        "stacks": stacks,
        "expect_gpu": bool(settings.get("expect_gpu", True)),
        "waived": list(settings.get("waived") or []),
        "driver_version": settings.get("driver_version") or "",
        "mig_layout": settings.get("mig_layout") if settings.get("mig_layout") is not None else "",
        "labels": labels,
        "labels_without_gpu": ({"nvidia.com/gpu.present": "false", **(settings.get("extra_labels") or {})}
                               if settings.get("labels_require_gpu", True) else None),
        # what the node advertises as allocatable (HAMi: only nvidia.com/gpu; memory and cores are in an annotation)
        "resources": sorted({r for e in entries.values() for r in e.get("allocatable") or e.get("resources") or []}),
        "node_annotations": sorted({a for e in entries.values() for a in e.get("node_annotations") or []}),
        # stacks that run their own scheduler and webhook (HAMi): checked through the API on control planes
        "own_schedulers": [{"stack": name, "deployment": e["own_scheduler"]["name"],
                            "webhook": e["own_scheduler"]["webhook"]}
                           for name, e in entries.items() if e.get("own_scheduler") and control_plane],
        "device_plugin_sockets": sorted({s for e in entries.values() for s in e.get("device_plugin_sockets") or []}),
        "stack_args": [dict(a, stack=name) for name, e in entries.items() for a in e.get("daemonset_args") or []]
        if control_plane else [],
        "scheduler": {},
        # the smoke tests asked for (gpu_node_verify_engine_smoke, _pod_smoke); a check-mode run runs neither
        "smoke": {"engine": bool(settings.get("engine_smoke", False)), "pod": bool(settings.get("pod_smoke", False))},
        "check_mode": bool(settings.get("check_mode")),
        # who may ask for GPUs by NVIDIA_VISIBLE_DEVICES on this node, as the runtime role decided and wrote it
        "isolation": (_state(states, "container_runtime").get("plan") or {}).get("isolation"),
        # in a run that is a check as a whole (site.yml --check; not verify.yml, whose check-mode refresh is how
        # it sees drift), the concerns it would change: their checks are pending, not failed
        "pending": sorted(name for name, state in states.items()
                          if isinstance(state, dict) and state.get("check_mode") and state.get("changed"))
        if settings.get("check_mode") else [],
    }
    if control_plane:
        plan = _state(states, "kube_scheduler").get("plan") or {}
        variant = plan.get("variant") or {}
        wanted = plan.get("action") == "configure"
        expected["scheduler"] = {
            "variant": (variant.get("api_version") or "").rsplit("/", 1)[-1]
            if variant.get("format") != "policy" else "Policy",
            "flag": variant.get("flag") or "--config",
            "config_path": variant.get("path") or "",
            "health_url": plan.get("health_url") or "",
            # each extender is recognised by its URL path (a stack's /gpushare-scheduler or /scheduler; a site's own
            # from kube_scheduler_extender_extra_extenders), so a user's host/port choice does not matter here
            "extender_paths": _extender_paths(entries, plan) if wanted else [],
            "state_missing": not plan,
            "needs_extender": any(e.get("extender") for e in entries.values()) or bool(plan.get("extenders")),
            # a minor newer than the newest known one, run on that one's variant (kubernetes_version_allow_newer)
            "variant_minor": variant.get("variant_minor") if plan.get("newer_than_known") else "",
            "version_note": plan.get("version_note") or "",
        }
    return expected


def _extender_paths(entries, plan):
    """The URL paths of the extenders the scheduler's config must list: the stacks', then those of the recorded
    plan's other extenders (a site's own, kube_scheduler_extender_extra_extenders)."""
    paths = [e["extender"]["path"] for e in entries.values() if e.get("extender")]
    for extender in plan.get("extenders") or []:
        path = urlsplit(str((extender or {}).get("url_prefix") or (extender or {}).get("urlPrefix") or "")).path
        path = path.rstrip("/")
        if path and not any(path.endswith(p) for p in paths):
            paths.append(path)
    return paths


def changes(states, kinds=("gpu_node", "control_plane")):
    """What the run changed and repaired on the host, per concern, from the recorded states: ``[{concern,
    changed, check_mode, changes, repaired}]`` for each concern that changed (or in check mode would). The stacks
    are a control plane's change (it applied them); a GPU node only reads their state."""
    found = []
    for concern in CONCERNS:
        if concern == "stacks" and "control_plane" not in kinds:
            continue
        state = (states or {}).get(concern)
        if not isinstance(state, dict) or not (state.get("changed") or state.get("repaired")):
            continue
        found.append({"concern": concern, "changed": bool(state.get("changed")),
                      "check_mode": bool(state.get("check_mode")), "changes": list(state.get("changes") or []),
                      "repaired": list(state.get("repaired") or [])})
    return found


def verify_host(settings, states, probe=None, api=None, run_failure=None, pod_smoke=None):
    """The report row of one host (report.report_row): what it shows against what it should, every check with its
    diagnosis, the verdict, and what the run changed and repaired there. ``api`` is the k8s_read answer of the
    host's API server (None: not read); ``pod_smoke`` the gpu_pod_smoke module's result (None: not run)."""
    settings = dict(settings or {})
    view = api_view(api, settings.get("node_name") or settings.get("host"))
    observed = verify_observed(probe, states, view, run_failure, pod_smoke)
    observed["dra"] = checks_dra.view(probe, states, settings.get("gpu_facts"))
    expected = verify_expected(settings, states)
    expected["dra"] = checks_dra.expected(expected["stacks"], states)
    results = diagnose(run_checks(observed, expected))
    row = report_row(observed, expected, results, verdict(results))
    row["changes"] = changes(states, expected["kinds"])
    return row



def engine_smoke_args(settings, runtime):
    """What the engine smoke runs with on a GPU node (the gpu_node_verify module's ``engine_smoke``): the engine and
    runtime mode the container_runtime concern recorded (``runtime``, its plan) and containerd's CRI plugin; {} when
    it does not run (off, not a GPU node, a check-mode run, an engine it cannot drive)."""
    settings = settings or {}
    engine = runtime.get("engine") or "none"
    if (not settings.get("engine_smoke") or settings.get("check_mode") or engine not in smoke.ENGINES
            or "gpu_node" not in list(settings.get("kinds") or [])):
        return {}
    return {"engine": engine, "mode": runtime.get("runtime_mode") or "legacy", "cri_plugin": runtime.get("cri_plugin")
            or ""}


def probe_args(settings, states):
    """What the gpu_node_verify module reads on the host, from its settings and recorded states: the GPU node side
    and/or the control-plane side, containerd's config (whose backups it looks at), the scheduler's config (whose
    extenders it asks) and the engine smoke (engine_smoke_args)."""
    kinds = list((settings or {}).get("kinds") or [])
    runtime = _state(states, "container_runtime").get("plan") or {}
    scheduler = _state(states, "kube_scheduler").get("plan") or {}
    containerd = [f["path"] for f in runtime.get("files") or [] if str(f.get("path", "")).endswith("config.toml")]
    return {
        "engine_smoke": engine_smoke_args(settings, runtime),
        "gpu_node": "gpu_node" in kinds,
        "control_plane": "control_plane" in kinds,
        "containerd_config": containerd[0] if containerd else "",
        "scheduler_config_path": (scheduler.get("variant") or {}).get("path") or ""
        if scheduler.get("action") == "configure" else "",
    }


def pod_smoke_answer(smokes, node_name, api_host=None):
    """The pod smoke result of ``node_name`` out of a gpu_pod_smoke result (one node's, or ``nodes``'), or out of the
    register of a gpu_pod_smoke task looped over batches of nodes (``item.nodes`` names each, ``item.host`` their API
    host: with ``api_host``, only that API server's batch, since two clusters may have nodes of the same name); a
    batch that failed or whose API host was unreachable answers as itself (no status: the smoke did not run); None
    when no batch had the node."""
    if not smokes:
        return None
    if not isinstance(smokes, dict):
        raise KgnError("the pod smoke must be a gpu_pod_smoke result or its looped register")
    if "results" not in smokes:
        return (smokes.get("nodes") or {}).get(node_name) if "nodes" in smokes else smokes
    for answer in smokes["results"]:
        item = answer.get("item") if isinstance(answer, dict) else None
        names = [n.get("node_name") for n in (item or {}).get("nodes") or [] if isinstance(n, dict)]
        if api_host is not None and ((item or {}).get("host") or "") != api_host:
            continue
        if node_name in names and not answer.get("skipped"):
            return (answer.get("nodes") or {}).get(node_name) if "nodes" in answer else answer
    return None


def settings_from_vars(host, host_vars, groups, check_mode=False):
    """The verify settings of a host that stopped before the verify play, from its inventory variables: the
    gpu_node_verify_* ones when the inventory sets them, else the contract's, else the defaults of
    roles/gpu_node_verify/defaults/main.yml (tests/unit/plugins/test_verify.py holds the two together)."""
    def get(name, contract=None, default=None):
        for key in (f"gpu_node_verify_{name}", contract):
            if key and key in host_vars and host_vars[key] is not None:
                return host_vars[key]
        return default

    gpu_group = get("gpu_group", default="gpu_nodes")
    cp_group = get("control_plane_group", default="kube_control_plane")
    kinds = [kind for kind, group in (("gpu_node", gpu_group), ("control_plane", cp_group))
             if host in (groups.get(group) or [])]
    return {"host": host, "node_name": get("node_name", default=host), "kinds": kinds,
            "stacks": list(get("stacks", "gpu_sharing_stacks", [])),
            "expect_gpu": bool(get("expect_gpu", default=True)), "waived": list(get("waived_checks", default=[])),
            "driver_version": str(get("driver_version", "gpu_driver_version", "")),
            "extra_labels": dict(get("extra_labels", default={})),
            "labels_require_gpu": bool(get("labels_require_gpu", default=True)),
            "mig_layout": get("mig_layout", "nvidia_mig_layout", ""), "gpu_facts": dict(get("gpu_facts", default={})),
            "check_mode": bool(check_mode),
            "engine_smoke": bool(get("engine_smoke", default=True)), "pod_smoke": bool(get("pod_smoke", default=True))}


def states_from_vars(host_vars, api_host_vars=None, this_run=None):
    """The recorded states of a host (``kgn_state_<concern>`` facts), the stacks' from its API host when the host
    applied none itself; with ``this_run`` (the concerns whose state this run recorded on the host) only those, not
    an older run's that the fact cache still holds."""
    states = {concern: host_vars.get(f"kgn_state_{concern}") or {} for concern in CONCERNS}
    if this_run is not None:
        states = {k: v for k, v in states.items() if k in this_run}
    if not states.get("stacks") and api_host_vars:
        states["stacks"] = api_host_vars.get("kgn_state_stacks") or {}
    return states
