"""What verify judges: a host's recorded plans and live states, its probe, and the API, turned into the
observations and expectations the checks read (plugins/filter/diagnose.py).

Nothing is decided again here. Each concern's module recorded its plan and what it saw live
(``kgn_state_<concern>``: the apply run of site.yml, or the check-mode refresh of playbooks/verify.yml):
the engine it chose, the scheduler's variant, flags and health URL, the driver version it pinned. Verify
reads those and adds what only it looks at (the device plugin sockets, the extenders' reachability, the
API's view of the node).
"""

from __future__ import annotations

from ansible_collections.kgn.gpu_nodes.plugins.module_utils import mig
from ansible_collections.kgn.gpu_nodes.plugins.module_utils import stacks as catalog
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError

MISSING = "no recorded state: the concern's play did not run on this host in this run (see the host's error)"


def _state(states: dict, concern: str) -> dict:
    state = (states or {}).get(concern)
    return state if isinstance(state, dict) and state.get("plan") is not None else {}


def _flags(argv: list) -> dict:
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


def _gpu(state: dict, probe: dict) -> dict:
    plan, live = state.get("plan") or {}, state.get("live") or {}
    gpu = live.get("gpu") or {}
    devices = probe.get("pci_devices") or []
    package = plan.get("version_package") or ""
    smi = live.get("nvidia_smi") or {}
    return {
        "present": bool(devices) or bool(gpu.get("gpu_present")),
        "pci_devices": devices,
        "modules": probe.get("modules") or {},
        "kernel_driver_version": live.get("kernel_module_version"),
        "package_name": package or None,
        "adopted": plan.get("adopted"),
        "package_version": (live.get("packages") or {}).get(package),
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


def _runtime(state: dict, toolkit: dict, probe: dict) -> dict:
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
        "backup_mentions_nvidia": probe.get("containerd_backup_mentions_nvidia"),
        # our drop-in is on disk but the main config no longer imports it
        "dropin": live.get("dropin") or "",
        "dropin_orphaned": bool(live.get("dropin_orphaned")),
        "stale_files": list(live.get("stale_files") or []),
        "binary": binary,
    }
    return {
        "engine": engine,
        "requested": None,
        "installed": dict(plan.get("versions") or {}),
        engine: detail,
        "toolkit_installed": bool(binary.get("exists")) or bool((toolkit.get("live") or {}).get("binary")),
    }


def _scheduler(state: dict, probe: dict) -> dict:
    plan, live = state.get("plan") or {}, state.get("live") or {}
    network = probe.get("scheduler") or {}
    return {
        "process": {"running": bool(live.get("pid")), "pid": live.get("pid"),
                    "flags": _flags((live.get("argv") or [])[1:])},
        # what the manifest or the unit with its drop-ins says now (the scheduler reads it at its next start)
        "persisted": {"style": plan.get("style") or "unknown", "path": plan.get("manifest") or plan.get("dropin") or "",
                      "flags": _flags((live.get("persisted_argv") or plan.get("current_argv") or [])[1:])},
        "config": network.get("config") or {},
        "health": {"url": live.get("health_url") or plan.get("health_url") or "",
                   "status": 200 if live.get("healthy") else None,
                   "body": "ok" if live.get("healthy") else "",
                   "error": "" if live.get("healthy") else (live.get("health") or MISSING)},
        "extenders": network.get("extenders") or [],
        "kube_proxy_mode": network.get("kube_proxy_mode"),
        "route_localnet": network.get("route_localnet"),
        "problems": list(live.get("problems") or []),
    }


def _mig(state: dict) -> dict:
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


def _smoke(result: object) -> dict | None:
    """A smoke module's result (gpu_smoke, gpu_pod_smoke), or None when the smoke did not run (off, a task Ansible
    skipped)."""
    return dict(result) if isinstance(result, dict) and "summary" in result else None


def verify_observed(probe: object, states: object, api: object = None) -> dict:
    """The observations of one host in the shape the checks read: ``{gpu, runtime, device_plugin, mig, smoke,
    scheduler, api}`` from the recorded states (``{concern: kgn_state_<concern>}``), the probe (the
    gpu_node_probe module's ``observed``, with ``smoke``: the gpu_smoke and gpu_pod_smoke results) and the API's
    answer."""
    if not isinstance(probe, dict) or not isinstance(states or {}, dict):
        raise KgnError("verify_observed: the probe's observed and the states must be mappings")
    states = states or {}
    observed = {"api": api or {}}
    if probe.get("gpu_node"):
        observed["gpu"] = _gpu(_state(states, "nvidia_driver"), probe)
        observed["runtime"] = _runtime(_state(states, "container_runtime"),
                                       _state(states, "nvidia_container_toolkit"), probe)
        observed["device_plugin"] = probe.get("device_plugin") or {}
        observed["mig"] = _mig(_state(states, "nvidia_mig"))
        observed["smoke"] = {kind: _smoke((probe.get("smoke") or {}).get(kind)) for kind in ("engine", "pod")}
    if probe.get("control_plane"):
        observed["scheduler"] = _scheduler(_state(states, "kube_scheduler"), probe)
    return observed


def verify_expected(settings: object, states: object) -> dict:
    """What one host should show: ``settings`` are the verify role's inputs (host, kinds, stacks,
    expect_gpu, waived, driver_version, extra_labels, labels_require_gpu, stack_sockets, stack_args, check_mode:
    whether the run is a check as a whole); the
    scheduler's variant, config file, flag, health URL and extenders come from its recorded plan."""
    if not isinstance(settings, dict):
        raise KgnError("verify_expected: settings must be a mapping")
    states = states or {}
    stacks = list(settings.get("stacks") or [])
    entries = catalog.stack_catalog(stacks)
    kinds = list(settings.get("kinds") or [])
    labels: dict = {}
    for entry in entries.values():
        labels.update(entry.get("node_labels") or {})
    labels.update(settings.get("extra_labels") or {})
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
                           for name, e in entries.items()
                           if e.get("own_scheduler") and "control_plane" in kinds],
        "device_plugin_sockets": sorted({s for stack in stacks
                                         for s in (settings.get("stack_sockets") or {}).get(stack, [])}),
        "stack_args": [a for stack in stacks for a in (settings.get("stack_args") or {}).get(stack, [])]
        if "control_plane" in kinds else [],
        "scheduler": {},
        # in a run that is a check as a whole (site.yml --check; not verify.yml, whose check-mode refresh is how
        # it sees drift), the concerns it would change: their checks are pending, not failed (verify_checks)
        "pending": sorted(name for name, state in states.items()
                          if isinstance(state, dict) and state.get("check_mode") and state.get("changed"))
        if settings.get("check_mode") else [],
    }
    if "control_plane" in kinds:
        plan = _state(states, "kube_scheduler").get("plan") or {}
        variant = plan.get("variant") or {}
        wanted = plan.get("action") == "configure"
        expected["scheduler"] = {
            "variant": (variant.get("api_version") or "").rsplit("/", 1)[-1]
            if variant.get("format") != "policy" else "Policy",
            "flag": variant.get("flag") or "--config",
            "config_path": variant.get("path") or "",
            "health_url": plan.get("health_url") or "",
            # each stack's extender is recognised by its URL path (/gpushare-scheduler, /scheduler)
            "extender_paths": [e["extender"]["path"] for e in entries.values() if e.get("extender")]
            if wanted else [],
            "state_missing": not plan,
        }
    return expected
