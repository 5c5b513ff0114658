"""What the running container engine shows (node side), judged against the runtime plan.

The container_runtime module checks it after every change and on every run; verify (gpu_node_verify)
reports it. One place decides what "the engine runs nvidia" means: the engine answers, it knows the
nvidia runtime, nvidia is its default (when asked), it was started after its config files last
changed, and the runtime binary it is told to run executes.
"""

import os

from ansible_collections.kgn.gpu_nodes.plugins.module_utils import host
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.runtime import NVIDIA_RUNTIME, toml_parse


def _docker_live(module):
    rc, out, err = host.run(module, ["docker", "info", "--format", "{{json .}}"], timeout=20)
    info = {}
    if rc == 0:
        try:
            info = module.from_json(out)
        except ValueError:
            info = {}
    answered = bool(info.get("ServerVersion"))
    return {
        "answered": answered,
        "error": "" if answered else (err or out or "no answer").strip()[:300],
        "default_runtime": info.get("DefaultRuntime") or "",
        "runtimes": sorted((info.get("Runtimes") or {}).keys()),
    }


def _containerd_live(module, plan):
    rc, out, err = host.run(module, ["ctr", "--timeout", "5s", "version"], timeout=20)
    answered = rc == 0
    live = {"answered": answered, "error": "" if answered else (err or out or "no answer").strip()[:300]}
    # The running daemon's CRI settings (crictl talks to it); without crictl, the files it was started on.
    rc, out, _ = host.run(module, ["crictl", "info"], timeout=20)
    if rc == 0:
        try:
            config = module.from_json(out).get("config", {}).get("containerd", {})
            live["default_runtime"] = config.get("defaultRuntimeName", "")
            live["runtimes"] = sorted((config.get("runtimes") or {}).keys())
            live["source"] = "crictl info"
            return live
        except (ValueError, AttributeError):
            pass
    rc, out, _ = host.run(module, ["containerd", "config", "dump"], timeout=20)
    cri = {}
    if rc == 0:
        try:
            cri = toml_parse(out, "containerd config dump").get("plugins", {}).get(plan["cri_plugin"], {})
        except KgnError:
            cri = {}
    section = cri.get("containerd", {}) if isinstance(cri, dict) else {}
    live["default_runtime"] = section.get("default_runtime_name", "")
    live["runtimes"] = sorted((section.get("runtimes") or {}).keys())
    live["source"] = "containerd config dump (the files the running daemon was started on)"
    return live


def _crio_live(module):
    rc, out, err = host.run(module, ["crio", "status", "config"], timeout=20)
    if rc != 0:
        return {"answered": False, "error": (err or out or "no answer").strip()[:300], "default_runtime": "",
                "runtimes": []}
    try:
        runtime = toml_parse(out, "crio status config").get("crio", {}).get("runtime", {})
    except KgnError:
        runtime = {}
    return {"answered": True, "error": "", "default_runtime": runtime.get("default_runtime", ""),
            "runtimes": sorted((runtime.get("runtimes") or {}).keys())}


def live_state(module, plan, set_default=True):
    """What the running engine of the plan shows, and ``problems``: why it does not run nvidia on the
    planned files (empty when it does)."""
    engine = plan["engine"]
    unit = host.service(module, plan["service"])
    if engine == "docker":
        live = _docker_live(module)
    elif engine == "containerd":
        live = _containerd_live(module, plan)
    else:
        live = _crio_live(module)
    live.update({"engine": engine, "service": unit["state"], "active": unit["active"]})
    live["stale_files"] = host.changed_since([f["path"] for f in plan["files"]], unit["started"])
    problems = []
    if not unit["active"]:
        problems.append(f"{plan['service']} is not running ({unit['state']})")
    elif not live["answered"]:
        problems.append(f"{engine} does not answer ({live['error']})")
    else:
        if NVIDIA_RUNTIME not in live["runtimes"]:
            problems.append(f"{engine} has no nvidia runtime (runtimes: {', '.join(live['runtimes']) or 'none'})")
        if set_default and live["default_runtime"] != NVIDIA_RUNTIME:
            problems.append(f"{engine}'s default runtime is {live['default_runtime'] or 'unset'!r}, not nvidia")
    if live["stale_files"]:
        problems.append(f"{plan['service']} was started before {', '.join(live['stale_files'])} last changed "
                        "(a change that was never restarted)")
    live["problems"] = problems
    return live


def binary_state(module, name):
    """Whether the runtime binary an engine is told to run (a path, or a name Docker looks up in PATH)
    exists and executes."""
    path = name if name.startswith("/") else (module.get_bin_path(name) or "")
    if not path or not os.path.exists(path):
        return {"path": name, "exists": False, "executes": False, "version": "", "error": "not found"}
    rc, out, err = host.run(module, [path, "--version"], timeout=20)
    first = (out or "").strip().splitlines()
    return {"path": path, "exists": True, "executes": rc == 0, "version": first[0] if first else "",
            "error": "" if rc == 0 else (err or out).strip()[:300]}
