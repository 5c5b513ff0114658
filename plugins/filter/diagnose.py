"""Verification verdicts: what the node probes observed -> checks -> diagnosis -> verdict.

Filters (documentation: the sidecar ``<filter>.yml`` files):
  verify_checks   observations of one host + what is expected -> list of checks
  diagnose        checks + the diagnosis catalog -> the same checks with known causes and fixes
  verify_verdict  checks -> ok / degraded / pending / failed
  verify_daemonsets  DaemonSet objects from the API -> [{name, namespace, args, desired, ready}]
  verify_own_schedulers  Deployments and MutatingWebhookConfigurations from the API -> {deployments, webhooks}
  verify_observed / verify_expected  the recorded states, the probe and the API -> what the checks read
                                     (plugins/module_utils/verify.py)

A check is a plain dict ``{id, title, status, summary, evidence}``; status is one of
``ok`` (as expected), ``warn`` (degrades the node, e.g. no GPU on a lab node), ``failed``
(GPU pods will not work as intended), ``skipped`` (could not be checked, ``summary`` says why,
e.g. "skipped: no API") or ``pending`` (failed, but a concern it depends on is what this check-mode run
would change: ``site.yml --check`` on a fresh node predicts the fix instead of calling the node failed).

The catalog is data (roles/gpu_node_verify/vars/main.yml): each entry names the check it
explains, the evidence it needs (``when``), the cause and the fix. Entries are matched in order;
an entry with ``fallback: true`` is used only when nothing more specific matched.
"""

from __future__ import annotations

import re
import string

from ansible.errors import AnsibleFilterError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils import smoke, verify
from ansible_collections.kgn.gpu_nodes.plugins.plugin_utils.filters import wrap

STATUSES = ("ok", "warn", "failed", "skipped", "pending")
VERDICTS = ("ok", "degraded", "pending", "failed")
# The concerns (kgn_state_<concern>) whose change makes each check pass. In a check-mode run that would change
# one of them, the check's failure is what the run would fix, not a fault: it is reported as pending.
CONCERNS = {
    "driver_package": ("nvidia_driver",),
    "driver_loaded": ("nvidia_driver",),
    "nvidia_smi": ("nvidia_driver",),
    "runtime_registered": ("nvidia_container_toolkit", "container_runtime"),
    "runtime_default": ("nvidia_container_toolkit", "container_runtime"),
    "runtime_binary": ("nvidia_container_toolkit", "container_runtime"),
    "runtime_current": ("nvidia_container_toolkit", "container_runtime"),
    "device_plugin_socket": ("nvidia_container_toolkit", "container_runtime", "node_labels", "stacks"),
    "node_labels": ("node_labels",),
    "allocatable": ("nvidia_container_toolkit", "container_runtime", "node_labels", "stacks"),
    "scheduler_config": ("kube_scheduler",),
    "scheduler_flag": ("kube_scheduler",),
    "scheduler_health": ("kube_scheduler",),
    "extender_reachable": ("kube_scheduler", "stacks"),
    "stack_args": ("stacks",),
    "engine_smoke": ("nvidia_driver", "nvidia_container_toolkit", "container_runtime"),
    "pod_smoke": ("nvidia_driver", "nvidia_container_toolkit", "container_runtime", "node_labels", "stacks"),
}
NO_GPU = "no NVIDIA GPU present on this node"
NO_API = "skipped: no API"

TITLES = {
    "gpu_present": "NVIDIA GPU on the PCI bus",
    "driver_package": "driver package at the pinned version",
    "driver_loaded": "NVIDIA kernel module loaded",
    "nvidia_smi": "nvidia-smi answers with the pinned version",
    "runtime_registered": "nvidia runtime registered in the container runtime",
    "runtime_default": "container runtime's default runtime is nvidia",
    "runtime_binary": "the runtime binary the engine runs exists and executes",
    "runtime_current": "the engine runs the config files on disk",
    "device_plugin_socket": "device plugin socket registered with kubelet",
    "mig_layout": "MIG mode and layout of each GPU as the inventory asks",
    "node_registered": "node registered in the API",
    "node_labels": "expected node labels present",
    "allocatable": "allocatable shows the stack's GPU resources",
    "scheduler_config": "scheduler-policy-config present with the extenders",
    "scheduler_flag": "kube-scheduler started with the config flag",
    "scheduler_health": "kube-scheduler healthy",
    "extender_reachable": "scheduler extender reachable at its URL",
    "stack_args": "GPU-sharing stack deployed with the required arguments",
    "node_annotations": "the stack's device plugin registered the node's GPUs (node annotation)",
    "own_scheduler_ready": "the stack's own scheduler ready (its extender answers)",
    "webhook_registered": "the stack's mutating webhook registered with its CA",
    **smoke.TITLES,  # engine_smoke, pod_smoke: checks with their own diagnosis (module_utils/smoke.py)
}


def _check(check_id, status, summary, /, **evidence):
    return {"id": check_id, "title": TITLES[check_id], "status": status, "summary": summary, "evidence": evidence}


def _need_dict(value, what):
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise AnsibleFilterError(f"{what} must be a dict, got {type(value).__name__} {value!r}")
    return value


def _version_matches(found, pinned):
    """True when ``found`` (535.309.01 or a Debian version 1:535.309.01-1~deb12u1) is the pinned one."""
    if not pinned:
        return True
    if not found:
        return False
    found, pinned = str(found).split(":", 1)[-1], str(pinned)  # drop a Debian epoch
    # a branch pin ("535") matches any 535.x; a full pin matches its Debian revisions (-1~deb12u1)
    return found == pinned or found.startswith((pinned + "-", pinned + "~", pinned + "."))


# --- GPU node checks -------------------------------------------------------------------------


def _gpu_checks(gpu, expected):
    checks = []
    pinned = expected.get("driver_version") or ""
    devices = gpu.get("pci_devices") or []
    present = bool(gpu.get("present"))
    modules = gpu.get("modules") or {}
    smi = gpu.get("smi") or {}
    if present:
        checks.append(_check("gpu_present", "ok", f"{len(devices)} NVIDIA GPU(s) on the PCI bus", count=len(devices)))
    else:
        status = "failed" if expected.get("expect_gpu", True) else "warn"
        checks.append(_check("gpu_present", status, NO_GPU, count=0, expect_gpu=bool(expected.get("expect_gpu", True))))

    package = gpu.get("package_version")
    adopted = gpu.get("adopted") or {}
    if adopted:
        found = adopted.get("version") or "version unknown"
        where = adopted.get("library") or adopted.get("nvidia_smi") or "the loaded kernel module"
        fits = not pinned or _version_matches(found, pinned)
        checks.append(_check("driver_package", "ok" if fits else "failed",
                             f"adopted: driver {found} ({where}), installed outside the packages and kept; the "
                             "packages that would replace it are blocked" + ("" if fits else f"; pinned {pinned}"),
                             installed=found, pinned=pinned or None, adopted=True))
    elif not pinned:
        checks.append(_check("driver_package", "skipped", "skipped: no pinned driver version given",
                             installed=package))
    elif not package:
        checks.append(_check("driver_package", "failed", f"no NVIDIA driver package installed (pinned {pinned})",
                             installed=None, pinned=pinned, package=gpu.get("package_name")))
    elif _version_matches(package, pinned):
        checks.append(_check("driver_package", "ok", f"{gpu.get('package_name') or 'driver'} {package} installed",
                             installed=package, pinned=pinned))
    else:
        checks.append(_check("driver_package", "failed", f"installed {package}, pinned {pinned}",
                             installed=package, pinned=pinned, package=gpu.get("package_name")))

    kernel_version = gpu.get("kernel_driver_version")
    evidence = {
        "nouveau_loaded": bool(modules.get("nouveau")),
        "nvidia_module_loaded": bool(modules.get("nvidia")),
        "secure_boot": gpu.get("secure_boot"),
        "kernel_driver_version": kernel_version,
        "installed": package,
    }
    if not present:
        checks.append(_check("driver_loaded", "skipped", NO_GPU, **evidence))
        checks.append(_check("nvidia_smi", "skipped", NO_GPU, smi_error=smi.get("error") or ""))
        return checks
    if kernel_version or modules.get("nvidia"):
        checks.append(_check("driver_loaded", "ok", f"kernel module loaded ({kernel_version or 'version unknown'})",
                             **evidence))
    else:
        checks.append(_check("driver_loaded", "failed", "the nvidia kernel module is not loaded", **evidence))

    smi_evidence = {
        "smi_found": bool(smi.get("found")),
        "smi_error": smi.get("error") or "",
        "smi_driver_version": "",
        "pinned": pinned,
        "kernel_driver_version": kernel_version,
        "installed": package,
        "nouveau_loaded": evidence["nouveau_loaded"],
    }
    gpus = smi.get("gpus") or []
    if not smi.get("found"):
        checks.append(_check("nvidia_smi", "failed", "nvidia-smi is not installed", **smi_evidence))
    elif smi.get("rc") != 0 or not gpus:
        first = (smi.get("error") or "no output").strip().splitlines()
        checks.append(_check("nvidia_smi", "failed", f"nvidia-smi failed: {first[0] if first else ''}",
                             **smi_evidence))
    else:
        smi_evidence["smi_driver_version"] = gpus[0].get("driver_version") or ""
        if _version_matches(smi_evidence["smi_driver_version"], pinned):
            checks.append(_check("nvidia_smi", "ok", f"driver {smi_evidence['smi_driver_version']}, "
                                 f"{len(gpus)} GPU(s)", **smi_evidence))
        else:
            checks.append(_check("nvidia_smi", "failed", f"nvidia-smi reports driver "
                                 f"{smi_evidence['smi_driver_version']}, pinned {pinned}", **smi_evidence))
    return checks


def _runtime_checks(runtime):
    engine = runtime.get("engine") or "none"
    if engine == "none":
        return [
            _check("runtime_registered", "failed", "no container runtime found (docker, containerd, crio)",
                   engine=engine, requested=runtime.get("requested")),
        ]
    data = runtime.get(engine) or {"error": f"{engine} is not installed"}
    registered = list(data.get("runtimes") or [])
    default = data.get("default_runtime") or ""
    binary = data.get("binary") or {}
    evidence = {
        "engine": engine,
        "active": data.get("active", True),
        "service": data.get("service") or "",
        "answered": bool(data.get("answered")),
        "error": data.get("error") or "",
        "default_runtime": default,
        "runtimes": registered,
        "nvidia_registered": "nvidia" in registered,
        "config_mentions_nvidia": data.get("config_mentions_nvidia"),
        "backup_mentions_nvidia": data.get("backup_mentions_nvidia"),
        "config_path": data.get("config_path") or "",
        "dropin": data.get("dropin") or "",
        "dropin_orphaned": bool(data.get("dropin_orphaned")),
        "toolkit_installed": runtime.get("toolkit_installed"),
    }
    checks = []
    if binary:
        binary_evidence = {"engine": engine, "binary": binary.get("path") or "", "exists": bool(binary.get("exists")),
                           "executes": bool(binary.get("executes")), "binary_error": binary.get("error") or ""}
        if binary.get("executes"):
            checks.append(_check("runtime_binary", "ok", f"{binary.get('path')} runs ({binary.get('version') or 'ok'})",
                                 **binary_evidence))
        else:
            why = "does not exist" if not binary.get("exists") else f"fails: {binary.get('error')}"
            checks.append(_check("runtime_binary", "failed", f"{binary.get('path')} {why}", **binary_evidence))
    if not data.get("answered"):
        line = (data.get("error") or "no answer").strip().splitlines()
        summary = f"{engine} did not answer: {line[0] if line else ''}"
        checks.append(_check("runtime_registered", "failed", summary, **evidence))
        checks.append(_check("runtime_default", "skipped", f"skipped: {engine} did not answer", **evidence))
        return checks
    if "nvidia" in registered:
        checks.append(_check("runtime_registered", "ok", f"{engine} knows the nvidia runtime", **evidence))
    else:
        checks.append(_check("runtime_registered", "failed", f"{engine} has no nvidia runtime "
                             f"(runtimes: {', '.join(registered) or 'none'})", **evidence))
    if default == "nvidia":
        checks.append(_check("runtime_default", "ok", f"{engine} default runtime: nvidia", **evidence))
    else:
        checks.append(_check("runtime_default", "failed", f"{engine} default runtime is "
                             f"{default or 'unset'}, not nvidia", **evidence))
    stale = list(data.get("stale_files") or [])
    if "stale_files" in data:
        if stale:
            checks.append(_check("runtime_current", "failed", f"{engine} was started before {', '.join(stale)} "
                                 "last changed", engine=engine, stale_files=stale))
        else:
            checks.append(_check("runtime_current", "ok", f"{engine} was started after its config files changed",
                                 engine=engine, stale_files=[]))
    return checks


def _device_plugin_check(device_plugin, expected, gpu_present):
    sockets = list((device_plugin or {}).get("sockets") or [])
    wanted = expected.get("device_plugin_sockets") or []
    evidence = {"sockets": sockets, "expected": wanted, "dir": (device_plugin or {}).get("dir") or ""}
    if not gpu_present:
        return _check("device_plugin_socket", "skipped", NO_GPU, **evidence)
    if not wanted:
        return _check("device_plugin_socket", "skipped", "skipped: no GPU-sharing stack on this node", **evidence)
    found = [s for s in sockets if any(re.fullmatch(p, s) for p in wanted)]
    if found:
        return _check("device_plugin_socket", "ok", f"registered: {', '.join(found)}", **evidence)
    where = evidence["dir"] or "the kubelet device-plugins folder"
    return _check("device_plugin_socket", "failed", f"no device plugin socket under {where} "
                  f"(found: {', '.join(sockets) or 'none'})", **evidence)


def _mig_check(found, expected):
    """The live MIG layout per GPU (recorded by the nvidia_mig module) against nvidia_mig_layout."""
    wanted = expected.get("mig_layout")
    found = found or {}
    gpus = found.get("gpus") or []
    evidence = {"layout": wanted, "recorded_layout": found.get("layout"), "gpus": gpus,
                "problems": found.get("problems") or []}
    if wanted in ("", None):
        return _check("mig_layout", "skipped", "skipped: MIG is not managed (nvidia_mig_layout is empty)", **evidence)
    if not found.get("recorded"):
        return _check("mig_layout", "failed", "no recorded MIG state: the nvidia_mig play did not run on this host",
                      **evidence)
    if found.get("layout") != wanted:
        return _check("mig_layout", "failed", f"the MIG layout was last applied for {found.get('layout')!r}, the "
                      f"inventory asks for {wanted!r}", **evidence)
    if evidence["problems"]:
        return _check("mig_layout", "failed", "; ".join(evidence["problems"]), **evidence)
    return _check("mig_layout", "ok", "; ".join(f"GPU {g['index']}: {g['layout']}" for g in gpus) or "no GPU",
                  **evidence)


def _api_checks(api, expected, gpu_present, runtime_failed):
    if not api or not api.get("reachable"):
        reason = (api or {}).get("error") or "no API server reachable from this inventory"
        return [
            _check(c, "skipped", NO_API, reason=reason) for c in ("node_registered", "node_labels", "allocatable")
        ]
    node = api.get("node")
    if not node:
        return [
            _check("node_registered", "failed", f"node {api.get('node_name')!r} is not registered in the API",
                   node_name=api.get("node_name")),
            _check("node_labels", "skipped", "skipped: node not registered"),
            _check("allocatable", "skipped", "skipped: node not registered"),
        ]
    name = api.get("node_name")
    checks = [_check("node_registered", "ok", f"node {name} registered", node_name=name)]
    labels = node.get("labels") or {}
    want = expected.get("labels") or {}
    if not gpu_present and expected.get("labels_without_gpu") is not None:
        # gpu_node_labels labels a GPU-less node only nvidia.com/gpu.present=false (require_gpu)
        want = expected["labels_without_gpu"]
    missing = sorted(k for k, v in want.items() if k not in labels)
    wrong = sorted(k for k, v in want.items() if k in labels and str(labels[k]) != str(v))
    evidence = {"missing": missing, "wrong": {k: labels[k] for k in wrong}, "expected": dict(want),
                "node_name": api.get("node_name")}
    if missing or wrong:
        parts = [f"missing {', '.join(f'{k}={want[k]}' for k in missing)}" if missing else "",
                 f"wrong {', '.join(f'{k}={labels[k]} (want {want[k]})' for k in wrong)}" if wrong else ""]
        checks.append(_check("node_labels", "failed", "; ".join(p for p in parts if p), **evidence))
    elif want:
        checks.append(_check("node_labels", "ok", ", ".join(f"{k}={v}" for k, v in sorted(want.items())), **evidence))
    else:
        checks.append(_check("node_labels", "skipped", "skipped: no labels expected", **evidence))

    allocatable = node.get("allocatable") or {}
    resources = expected.get("resources") or []
    zero = sorted(r for r in resources if str(allocatable.get(r, "0")) in ("0", ""))
    evidence = {"resources": list(resources), "allocatable": {r: allocatable.get(r) for r in resources},
                "zero": zero, "runtime_failed": runtime_failed, "labels_missing": bool(missing)}
    if not resources:
        checks.append(_check("allocatable", "skipped", "skipped: no GPU-sharing stack on this node", **evidence))
    elif not gpu_present:
        checks.append(_check("allocatable", "skipped", NO_GPU, **evidence))
    elif zero:
        checks.append(_check("allocatable", "failed", f"allocatable has no {', '.join(zero)}", **evidence))
    else:
        checks.append(_check("allocatable", "ok", ", ".join(f"{r}={allocatable[r]}" for r in resources), **evidence))
    wanted = expected.get("node_annotations") or []
    if wanted:
        annotations = node.get("annotations") or {}
        absent = [a for a in wanted if not str(annotations.get(a) or "").strip()]
        evidence = {"annotations": wanted, "absent": absent, "node_name": name, "labels_missing": bool(missing),
                    "sizes": {a: len(str(annotations.get(a) or "")) for a in wanted}}
        if not gpu_present:
            checks.append(_check("node_annotations", "skipped", NO_GPU, **evidence))
        elif absent:
            checks.append(_check("node_annotations", "failed", f"node {name} has no {', '.join(absent)}", **evidence))
        else:
            checks.append(_check("node_annotations", "ok", f"{', '.join(wanted)} present", **evidence))
    return checks


# --- control-plane checks --------------------------------------------------------------------


def _scheduler_flag_check(sched, flag, path, config):
    """The config flag on the running scheduler and in its unit/manifest."""
    process = sched.get("process") or {}
    persisted = sched.get("persisted") or {}
    in_process = (process.get("flags") or {}).get(flag)
    in_persisted = (persisted.get("flags") or {}).get(flag)
    evidence = {"flag": f"--{flag}={path}", "running": bool(process.get("running")),
                "process_value": in_process, "persisted_value": in_persisted,
                "process_ok": in_process == path, "persisted_ok": in_persisted == path,
                "style": persisted.get("style") or "unknown", "persisted_path": persisted.get("path") or "",
                "config_exists": bool(config.get("exists"))}
    where = evidence["persisted_path"] or "the unit/manifest"
    if not process.get("running"):
        return _check("scheduler_flag", "failed", "kube-scheduler is not running", **evidence)
    if evidence["process_ok"] and evidence["persisted_ok"]:
        return _check("scheduler_flag", "ok", f"--{flag}={path} on the process and in {where}", **evidence)
    if not evidence["persisted_ok"]:
        return _check("scheduler_flag", "failed", f"--{flag}={path} missing from {where} (found "
                      f"{in_persisted or 'no such flag'})", **evidence)
    return _check("scheduler_flag", "failed", f"the running kube-scheduler lacks --{flag}={path} "
                  f"(found {in_process or 'no such flag'}), though {where} has it", **evidence)


def _scheduler_checks(sched, expected):
    want = expected.get("scheduler") or {}
    if not want:
        return []
    checks = []
    flag, path = (want.get("flag") or "").lstrip("-"), want.get("config_path") or ""
    config = sched.get("config") or {}
    extenders = list(config.get("extender_urls") or [])
    # each stack's extender is recognised by its URL path (/gpushare-scheduler, /scheduler), so a
    # user's own host/port choice does not matter here
    wanted_paths = list(want.get("extender_paths") or [])
    evidence = {"path": path, "exists": bool(config.get("exists")), "extender_urls": extenders,
                "expected_paths": wanted_paths, "error": config.get("error") or ""}
    absent = [p for p in wanted_paths if not any(u.rstrip("/").endswith(p) for u in extenders)]
    if not wanted_paths:
        # No chosen stack needs an extender: kube_scheduler_extender leaves the scheduler as it is.
        reason = "no chosen stack needs a scheduler extender, so kube-scheduler keeps its own configuration"
        checks.append(_check("scheduler_config", "skipped", reason, **evidence))
        checks.append(_check("scheduler_flag", "skipped", reason, **evidence))
    elif not config.get("exists"):
        checks.append(_check("scheduler_config", "failed", f"{path} does not exist", **evidence))
    elif absent:
        checks.append(_check("scheduler_config", "failed", f"{path} lacks the extender(s) {', '.join(absent)}",
                             **evidence))
    else:
        checks.append(_check("scheduler_config", "ok", f"{path} ({len(extenders)} extender(s))", **evidence))

    if wanted_paths:
        checks.append(_scheduler_flag_check(sched, flag, path, config))

    health = sched.get("health") or {}
    evidence = {"url": health.get("url") or want.get("health_url") or "", "status": health.get("status"),
                "body": (health.get("body") or "")[:200], "error": health.get("error") or ""}
    if health.get("status") == 200:
        checks.append(_check("scheduler_health", "ok", f"{evidence['url']} -> 200 {evidence['body'].strip()}",
                             **evidence))
    else:
        why = evidence["error"] or f"HTTP {evidence['status']}"
        checks.append(_check("scheduler_health", "failed", f"{evidence['url']}: {why}", **evidence))

    for probe in sched.get("extenders") or []:
        evidence = {"url": probe.get("url"), "error": probe.get("error") or "", "loopback": bool(probe.get("loopback")),
                    "kube_proxy_mode": sched.get("kube_proxy_mode") or "unknown",
                    "route_localnet": sched.get("route_localnet")}
        if probe.get("reachable"):
            checks.append(_check("extender_reachable", "ok", f"{probe.get('url')} answers", **evidence))
        else:
            checks.append(_check("extender_reachable", "failed", f"{probe.get('url')}: {evidence['error']}",
                                 **evidence))
    return checks


def _stack_checks(api, expected):
    wanted = expected.get("stack_args") or []
    if not wanted:
        return []
    if not api or not api.get("reachable"):
        return [_check("stack_args", "skipped", NO_API, reason=(api or {}).get("error") or "")]
    checks = []
    daemonsets = {d.get("name"): d for d in api.get("daemonsets") or []}
    for want in wanted:
        ds = daemonsets.get(want.get("daemonset"))
        evidence = {"stack": want.get("stack"), "daemonset": want.get("daemonset"), "arg": want.get("arg"),
                    "deployed": ds is not None, "args": list((ds or {}).get("args") or [])}
        if ds is None:
            checks.append(_check("stack_args", "failed", f"DaemonSet {want.get('daemonset')} not deployed", **evidence))
        elif any(a == want.get("arg") or a.startswith(f"{want.get('arg')}=") for a in evidence["args"]):
            checks.append(_check("stack_args", "ok", f"{want.get('daemonset')} has {want.get('arg')}", **evidence))
        else:
            checks.append(_check("stack_args", "failed", f"{want.get('daemonset')} lacks {want.get('arg')}",
                                 **evidence))
    return checks


def _own_scheduler_checks(api, expected):
    """A stack's own scheduler Deployment (ready = its extender's readiness probe answers) and its webhook."""
    wanted = expected.get("own_schedulers") or []
    if not wanted:
        return []
    if not api or not api.get("reachable"):
        reason = (api or {}).get("error") or ""
        return [_check(c, "skipped", NO_API, reason=reason) for c in ("own_scheduler_ready", "webhook_registered")]
    checks = []
    deployments = {d.get("name"): d for d in api.get("deployments") or []}
    webhooks = {w.get("name"): w for w in api.get("webhooks") or []}
    for want in wanted:
        found = deployments.get(want.get("deployment"))
        evidence = {"stack": want.get("stack"), "deployment": want.get("deployment"), "deployed": found is not None,
                    "namespace": (found or {}).get("namespace") or "", "desired": (found or {}).get("desired", 0),
                    "ready": (found or {}).get("ready", 0)}
        if found is None:
            checks.append(_check("own_scheduler_ready", "failed", f"Deployment {want.get('deployment')} not deployed",
                                 **evidence))
        elif evidence["ready"] >= 1:
            checks.append(_check("own_scheduler_ready", "ok", f"{evidence['namespace']}/{want.get('deployment')} "
                                 f"{evidence['ready']}/{evidence['desired']} ready", **evidence))
        else:
            checks.append(_check("own_scheduler_ready", "failed", f"{evidence['namespace']}/{want.get('deployment')} "
                                 f"0/{evidence['desired']} ready", **evidence))
        hook = webhooks.get(want.get("webhook"))
        entries = (hook or {}).get("webhooks") or []
        evidence = {"stack": want.get("stack"), "webhook": want.get("webhook"), "registered": hook is not None,
                    "ca_bundle": bool(entries) and all(e.get("ca_bundle") for e in entries),
                    "services": [e.get("service") for e in entries]}
        if hook is None:
            checks.append(_check("webhook_registered", "failed",
                                 f"MutatingWebhookConfiguration {want.get('webhook')} not registered", **evidence))
        elif not evidence["ca_bundle"]:
            checks.append(_check("webhook_registered", "failed",
                                 f"{want.get('webhook')} has no caBundle: the API server cannot call it", **evidence))
        else:
            checks.append(_check("webhook_registered", "ok", f"{want.get('webhook')} -> "
                                 f"{', '.join(e['service'] for e in entries)}", **evidence))
    return checks


def verify_checks(observed, expected):
    """Turn one host's observations into checks (see the module docstring)."""
    observed = _need_dict(observed, "verify_checks: the observations (input)")
    expected = _need_dict(expected, "verify_checks: expected")
    kinds = expected.get("kinds") or []
    if not isinstance(kinds, list) or not set(kinds) <= {"gpu_node", "control_plane"} or not kinds:
        raise AnsibleFilterError(
            f"verify_checks: expected.kinds must be a non-empty list of 'gpu_node' and/or 'control_plane', "
            f"got {kinds!r}; the gpu_node_verify role sets it from the host's groups"
        )
    checks = []
    if "gpu_node" in kinds:
        gpu_checks = _gpu_checks(_need_dict(observed.get("gpu"), "observed.gpu"), expected)
        checks += gpu_checks
        gpu_present = bool((observed.get("gpu") or {}).get("present"))
        runtime_checks = _runtime_checks(_need_dict(observed.get("runtime"), "observed.runtime"))
        checks += runtime_checks
        runtime_failed = any(c["status"] == "failed" for c in runtime_checks)
        checks.append(_device_plugin_check(observed.get("device_plugin"), expected, gpu_present))
        if expected.get("mig_layout") not in ("", None):  # MIG not managed: no check, nothing to show
            checks.append(_mig_check(observed.get("mig"), expected))
        checks += _api_checks(observed.get("api"), expected, gpu_present, runtime_failed)
        ran = observed.get("smoke") or {}
        checks += smoke.smoke_checks(ran.get("engine"), ran.get("pod"))
    if "control_plane" in kinds:
        checks += _scheduler_checks(_need_dict(observed.get("scheduler"), "observed.scheduler"), expected)
        checks += _stack_checks(observed.get("api"), expected)
        checks += _own_scheduler_checks(observed.get("api"), expected)
    waived = expected.get("waived") or []
    unknown = sorted(set(waived) - set(TITLES))
    if unknown:
        raise AnsibleFilterError(f"verify_checks: waived checks {unknown} do not exist; known: {', '.join(TITLES)}")
    for check in checks:
        # a failure this inventory cannot avoid (e.g. no extender runs in a lab) degrades, still shown
        if check["status"] == "failed" and check["id"] in waived:
            check["status"] = "warn"
            check["summary"] = f"{check['summary']} (waived on this inventory)"
    pending = set(expected.get("pending") or [])
    for check in checks:
        would = sorted(pending.intersection(CONCERNS.get(check["id"], ())))
        if check["status"] == "failed" and would:
            check["status"] = "pending"
            check["summary"] = f"{check['summary']} (pending: this check-mode run would change {', '.join(would)})"
    return checks


# --- diagnosis -------------------------------------------------------------------------------


def _matches(condition, value):
    if isinstance(condition, dict):
        if "regex" in condition:
            return value is not None and re.search(condition["regex"], str(value)) is not None
        if "not" in condition:
            return not _matches(condition["not"], value)
        if "nonempty" in condition:
            return bool(value) == bool(condition["nonempty"])
        raise AnsibleFilterError(f"diagnose: unknown condition {condition!r}; use regex, not or nonempty")
    if isinstance(condition, list):
        return value in condition
    return value == condition


class _Blank(dict):
    def __missing__(self, key):
        return "?"


def _fill(text, check):
    values = _Blank({k: (", ".join(map(str, v)) if isinstance(v, list) else v)
                     for k, v in (check.get("evidence") or {}).items()})
    values.setdefault("summary", check.get("summary"))
    try:
        return string.Formatter().vformat(str(text), (), values)
    except (ValueError, IndexError):
        return str(text)


def _validate_catalog(catalog):
    if not isinstance(catalog, list):
        raise AnsibleFilterError(f"diagnose: the catalog must be a list of entries, got {type(catalog).__name__}")
    for entry in catalog:
        missing = [k for k in ("id", "check", "cause", "fix") if not isinstance(entry, dict) or not entry.get(k)]
        if missing:
            raise AnsibleFilterError(f"diagnose: catalog entry {entry!r} lacks {', '.join(missing)}; every entry "
                                     f"needs id, check, cause and fix")
        if entry["check"] not in TITLES:
            raise AnsibleFilterError(f"diagnose: catalog entry {entry['id']} names unknown check "
                                     f"{entry['check']!r}; known: {', '.join(TITLES)}")


def diagnose(checks, catalog):
    """Add ``diagnosis`` (list of {id, cause, fix, source}) to every failed or warn check."""
    if not isinstance(checks, list):
        raise AnsibleFilterError(f"diagnose: input must be the list from verify_checks, got {checks!r}")
    _validate_catalog(catalog)
    failed_ids = {c.get("id") for c in checks if c.get("status") == "failed"}
    result = []
    for check in checks:
        check = dict(check)
        if check.get("status") in ("failed", "warn"):
            found, fallback = [], []
            for entry in catalog:
                if entry["check"] != check.get("id") or entry.get("status", check["status"]) != check["status"]:
                    continue
                evidence = check.get("evidence") or {}
                if not all(_matches(cond, evidence.get(key)) for key, cond in (entry.get("when") or {}).items()):
                    continue
                if not set(entry.get("with_failed") or []) <= failed_ids:
                    continue
                item = {"id": entry["id"], "cause": _fill(entry["cause"], check), "fix": _fill(entry["fix"], check),
                        "source": entry.get("source", "")}
                (fallback if entry.get("fallback") else found).append(item)
            # a check that carries its own diagnosis (the smoke checks) keeps it when the catalog has nothing
            check["diagnosis"] = found or fallback or list(check.get("diagnosis") or [])
        else:
            check["diagnosis"] = []
        result.append(check)
    return result


def verify_verdict(checks):
    """``failed`` if any check failed, ``pending`` if any is pending (what a check-mode run would fix),
    ``degraded`` if any warned, else ``ok``."""
    if not isinstance(checks, list):
        raise AnsibleFilterError(f"verify_verdict: input must be a list of checks, got {checks!r}")
    bad = [c for c in checks if not isinstance(c, dict) or c.get("status") not in STATUSES]
    if bad:
        raise AnsibleFilterError(f"verify_verdict: checks need a status in {STATUSES}, got {bad[0]!r}")
    statuses = {c["status"] for c in checks}
    if "failed" in statuses:
        return "failed"
    if "pending" in statuses:
        return "pending"
    if "warn" in statuses:
        return "degraded"
    return "ok"


def verify_daemonsets(items):
    """DaemonSet objects (``kubectl get ds -o json`` items) -> [{name, namespace, args, desired, ready}]."""
    if not isinstance(items, list):
        raise AnsibleFilterError(f"verify_daemonsets: input must be the 'items' list of a DaemonSetList, got "
                                 f"{type(items).__name__}")
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
                       "desired": status.get("desiredNumberScheduled", 0), "ready": status.get("numberReady", 0)})
    return result


def verify_own_schedulers(items):
    """Deployments and MutatingWebhookConfigurations (the ``items`` of ``kubectl get
    deployments.apps,mutatingwebhookconfigurations.admissionregistration.k8s.io -A -o json``) ->
    ``{deployments: [{name, namespace, desired, ready}], webhooks: [{name, webhooks: [{name, service,
    ca_bundle}]}]}``; other kinds are ignored."""
    if not isinstance(items, list):
        raise AnsibleFilterError(f"verify_own_schedulers: input must be the 'items' list of a List, got "
                                 f"{type(items).__name__}")
    result = {"deployments": [], "webhooks": []}
    for item in items:
        if not isinstance(item, dict):
            continue
        meta = item.get("metadata") or {}
        if item.get("kind") == "Deployment":
            status = item.get("status") or {}
            result["deployments"].append({"name": meta.get("name"), "namespace": meta.get("namespace"),
                                          "desired": (item.get("spec") or {}).get("replicas", 1),
                                          "ready": status.get("readyReplicas", 0)})
        elif item.get("kind") == "MutatingWebhookConfiguration":
            hooks = []
            for hook in item.get("webhooks") or []:
                client = hook.get("clientConfig") or {}
                service = client.get("service") or {}
                where = (f"{service.get('namespace')}/{service.get('name')}:{service.get('port', 443)}"
                         f"{service.get('path') or ''}" if service else client.get("url") or "")
                hooks.append({"name": hook.get("name"), "service": where, "ca_bundle": bool(client.get("caBundle"))})
            result["webhooks"].append({"name": meta.get("name"), "webhooks": hooks})
    return result


class FilterModule:
    """Verification filters."""

    def filters(self):
        return {
            "verify_checks": verify_checks,
            "diagnose": diagnose,
            "verify_verdict": verify_verdict,
            "verify_daemonsets": verify_daemonsets,
            "verify_own_schedulers": verify_own_schedulers,
            **wrap({"verify_observed": verify.verify_observed, "verify_expected": verify.verify_expected}),
        }
