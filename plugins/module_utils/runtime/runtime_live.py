"""What the running container engine shows (node side), judged against the runtime plan.

The container_runtime module checks it after every change and on every run; verify (gpu_node_verify)
reports it. One place decides what "the engine runs nvidia" means: the engine answers, it knows the
nvidia runtime, nvidia is its default (when asked), it was started after its config files last
changed, and the runtime binary it is told to run executes.
"""

import fnmatch
import glob
import os

from ansible_collections.kgn.gpu_nodes.plugins.module_utils import host
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.runtime import cdi, tomlio
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.runtime.runtime import (
    NVIDIA_RUNTIME,
    toml_parse,
)

# At most this many files are read for one engine's imports or drop-in folder (a node has a handful).
MAX_CONFIG_FILES = 200


def _docker_live(module):
    rc, out, err = host.run(module, ["docker", "info", "--format", "{{json .}}"], timeout=20)
    info = {}
    if rc == 0:
        try:
            info = module.from_json(out)
        except ValueError:
            info = {}
    answered = bool(info.get("ServerVersion"))
    # Docker 25+ lists the CDI spec folders in `docker info` when CDI is on (empty or absent when off)
    dirs = info.get("CDISpecDirs")
    return {
        "answered": answered,
        "error": "" if answered else (err or out or "no answer").strip()[:300],
        "default_runtime": info.get("DefaultRuntime") or "",
        "runtimes": sorted((info.get("Runtimes") or {}).keys()),
        "cdi": {"enabled": bool(dirs) if answered else None, "spec_dirs": list(dirs or []), "source": "docker info"},
    }


def _containerd_live(module, plan):
    rc, out, err = host.run(module, ["ctr", "--timeout", "5s", "version"], timeout=20)
    answered = rc == 0
    live = {"answered": answered, "error": "" if answered else (err or out or "no answer").strip()[:300]}
    # The running daemon's CRI settings (crictl talks to it); without crictl, the files it was started on.
    rc, out, _ = host.run(module, ["crictl", "info"], timeout=20)
    if rc == 0:
        try:
            whole = module.from_json(out).get("config", {})
            config = whole.get("containerd", {})
            live["default_runtime"] = config.get("defaultRuntimeName", "")
            live["runtimes"] = sorted((config.get("runtimes") or {}).keys())
            live["source"] = "crictl info"
            # the CRI's own settings as the running daemon holds them (containerd v2.1.0
            # internal/cri/config/config.go: json enableCDI, cdiSpecDirs; the same names in 1.7)
            live["cdi"] = {"enabled": whole.get("enableCDI"), "spec_dirs": list(whole.get("cdiSpecDirs") or []),
                           "source": "crictl info"}
            return live
        except (ValueError, AttributeError):
            pass
    rc, out, _ = host.run(module, ["containerd", "config", "dump"], timeout=20)
    cri = {}
    if rc == 0:
        try:
            cri = toml_parse(out, "containerd config dump").get("plugins", {}).get(plan["cri_plugin"], {})
        except tomlio.NoReader as err:
            live["unread"] = f"containerd config dump: {err}, or crictl"
        except KgnError:
            cri = {}
    section = cri.get("containerd", {}) if isinstance(cri, dict) else {}
    live["default_runtime"] = section.get("default_runtime_name", "")
    live["runtimes"] = sorted((section.get("runtimes") or {}).keys())
    live["source"] = "containerd config dump (the files the running daemon was started on)"
    enabled = cri.get("enable_cdi") if isinstance(cri, dict) else None
    live["cdi"] = {"enabled": enabled, "spec_dirs": list((cri or {}).get("cdi_spec_dirs") or []),
                   "source": "containerd config dump"}
    return live


def _crio_live(module):
    rc, out, err = host.run(module, ["crio", "status", "config"], timeout=20)
    if rc != 0:
        return {"answered": False, "error": (err or out or "no answer").strip()[:300], "default_runtime": "",
                "runtimes": []}
    unread = ""
    try:
        runtime = toml_parse(out, "crio status config").get("crio", {}).get("runtime", {})
    except tomlio.NoReader as err:
        runtime, unread = {}, f"crio status config: {err}"
    except KgnError:
        runtime = {}
    # CRI-O has CDI on with no switch; the folders it scans are in its runtime table
    live = {"answered": True, "error": "", "default_runtime": runtime.get("default_runtime", ""),
            "runtimes": sorted((runtime.get("runtimes") or {}).keys()),
            "cdi": {"enabled": True, "spec_dirs": list(runtime.get("cdi_spec_dirs") or []),
                    "source": "crio status config"}}
    if unread:
        live["unread"] = unread
    return live


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
    # the file of the node that decides the default against the plan (runtime.runtime_plan, default_set_by)
    later = plan.get("default_set_by")
    live["default_set_by"] = ({key: later.get(key) for key in ("path", "key", "value", "ours", "config", "table")}
                              if later else None)
    live["stale_files"] = host.changed_since([f["path"] for f in plan["files"]], unit["started"])
    problems = []
    if not unit["active"]:
        problems.append(f"{plan['service']} is not running ({unit['state']})")
    elif not live["answered"]:
        problems.append(f"{engine} does not answer ({live['error']})")
    elif live.get("unread"):
        problems.append(f"{engine} answers, but its answer was not read ({live['unread']})")
    else:
        if NVIDIA_RUNTIME not in live["runtimes"]:
            problems.append(f"{engine} has no nvidia runtime (runtimes: {', '.join(live['runtimes']) or 'none'})")
        if set_default and live["default_runtime"] != NVIDIA_RUNTIME:
            later = live.get("default_set_by")
            problems.append(f"{engine}'s default runtime is {live['default_runtime'] or 'unset'!r}, not nvidia"
                            + (f" ({later['path']} sets {later['key']} = {later['value']!r})" if later else ""))
    if plan.get("runtime_mode") == "cdi" and live.get("answered"):
        row = cdi.engine_row({"name": engine, **(live.get("cdi") or {})}, plan["cdi"]["spec_dir"])
        if row["status"] == "failed":
            problems.append(row["summary"])
    if live["stale_files"]:
        problems.append(f"{plan['service']} was started before {', '.join(live['stale_files'])} last changed "
                        "(a change that was never restarted)")
    live["problems"] = problems
    return live


# --- the engines' other config files (what runtime.runtime_plan reads to find a later file that decides the default)


def go_glob(pattern):
    """Go's filepath.Glob of an absolute pattern on this node: each folder listed sorted by name, ``*``, ``?`` and
    ``[...]`` matching within one path component (dot files too), so the same order as containerd's."""
    found = ["/"]
    for part in [p for p in pattern.split("/") if p]:
        if any(c in part for c in "*?["):
            found = [os.path.join(folder, name) for folder in found if os.path.isdir(folder)
                     for name in sorted(os.listdir(folder)) if fnmatch.fnmatchcase(name, part.replace("[^", "[!"))]
        else:
            found = [os.path.join(folder, part) for folder in found]
    return [path for path in found if os.path.lexists(path)]


def crio_dropin_texts(folder):
    """``{path: text}`` of every file under CRI-O's drop-in folder (CRI-O walks it whole, subfolders too, whatever
    the names: cri-o v1.33.0 pkg/config/config.go UpdateFromPath)."""
    files = {}
    for root, dirs, names in os.walk(folder):
        dirs.sort()
        for name in sorted(names):
            if len(files) >= MAX_CONFIG_FILES:
                return files
            path = os.path.join(root, name)
            text = host.read(path)
            if text is not None:
                files[path] = text
    return files


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


# --- the node's CDI spec ---------------------------------------------------------------------------

NVML_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
             "/usr/local/nvidia/lib64", "/usr/local/nvidia/lib")


def driver_on_node(module, spec_paths=()):
    """``(driver, gpus)``: the running driver (``version`` from nvidia-smi, ``answers``, ``installed_at``: the
    ctime of the NVML library, set when the package manager or an installer put it there) and the GPUs
    ``[{index, uuid}]`` (None when nvidia-smi does not answer)."""
    rc, out, _ = host.run(module, ["nvidia-smi", "--query-gpu=index,uuid,driver_version", "--format=csv,noheader"],
                          timeout=30)
    gpus, version = None, None
    if rc == 0:
        gpus = []
        for line in (out or "").splitlines():
            parts = [p.strip() for p in line.split(",")]
            if len(parts) == 3 and parts[0].isdigit():
                gpus.append({"index": int(parts[0]), "uuid": parts[1]})
                version = parts[2]
    folders = [os.path.dirname(p) for p in spec_paths if "/libnvidia-ml.so" in p] + list(NVML_DIRS)
    installed_at = None
    for folder in folders:
        found = sorted(glob.glob(os.path.join(folder, "libnvidia-ml.so.*[0-9].*")))
        if found:
            installed_at = os.stat(os.path.realpath(found[-1])).st_ctime
            break
    return {"version": version, "answers": rc == 0, "installed_at": installed_at}, gpus


def cdi_state(module, plan, engine_live):
    """The CDI rows (module_utils/runtime/cdi.py) of the node as it is now: the spec on disk, the driver and GPUs, the
    host paths the spec names, the running engine's CDI settings."""
    section = plan["cdi"]
    path = section["spec_path"]
    text = host.read(path)
    info = host.stat(path)
    try:
        names = cdi.host_paths(cdi.parse_spec(text, path))
    except KgnError:
        names = []
    driver, gpus = driver_on_node(module, names)
    state = {"spec_path": path, "spec_text": text, "spec_mtime": info["mtime"] if info else None, "driver": driver,
             "gpus": gpus, "paths": {p: os.path.exists(p) for p in names}, "spec_dir": section["spec_dir"],
             "engine": {"name": plan["engine"], **((engine_live or {}).get("cdi") or {})}}
    rows = cdi.cdi_checks(state)
    return {"spec_path": path, "spec_exists": text is not None, "driver": driver, "gpus": gpus, "rows": rows,
            "stale": any(r["id"] == "cdi_fresh" and r["status"] == "failed" for r in rows),
            "devices": next((r["evidence"].get("devices") for r in rows if r["id"] == "cdi_spec"
                             and r["status"] == "ok"), []),
            "engine_cdi": (engine_live or {}).get("cdi"), "refresh_unit": section["refresh"]["unit"]}
