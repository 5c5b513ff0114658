"""The node's CDI spec (Container Device Interface): what it says, and whether it still fits the node.

Pure functions over plain data (no I/O). The container_runtime module reads the spec, the driver, the GPUs
and the paths the spec names on the node and hands them here; the verify checks read the same state
(``kgn_state_container_runtime.live.cdi``). A spec is what ``nvidia-ctk cdi generate`` wrote: its devices
(``nvidia.com/gpu=0``, ``=GPU-<uuid>``, ``=all``), and container edits that name host files (device nodes,
driver libraries and binaries mounted from the host, hooks). Format: the CDI specification
(cncf-tags/container-device-interface SPEC.md; cdiVersion 0.5.0 as nvidia-ctk 1.20.0 writes it).

The checks (one row each, ``{id, status, summary, evidence}``):
  cdi_spec     the spec exists and parses                       -> "no spec"
  cdi_devices  it lists every GPU nvidia-smi shows (index, UUID)
  cdi_fresh    it was written for the running driver, after it   -> "stale spec (driver changed)"
  cdi_paths    every host path it names exists                   -> "spec names a missing file"
  cdi_engine   the engine has CDI on and scans the spec's folder -> "engine has CDI off"
"""

import json
import re

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError

KIND = "nvidia.com/gpu"
# A driver library named with the driver's version (libcuda.so.580.159.04): the version the spec was made for.
_VERSIONED = re.compile(r"/lib(?:cuda|nvidia-ml)\.so\.(\d+\.\d+(?:\.\d+)?)$")
IDS = ("cdi_spec", "cdi_devices", "cdi_fresh", "cdi_paths", "cdi_engine")
TITLES = {
    "cdi_spec": "CDI spec of the node's GPUs present and readable",
    "cdi_devices": "CDI spec lists every GPU nvidia-smi shows",
    "cdi_fresh": "CDI spec written for the running driver",
    "cdi_paths": "every host file the CDI spec names exists",
    "cdi_engine": "the engine has CDI on and reads the spec's folder",
}


def parse_spec(text: object, path: str = "the CDI spec") -> dict:
    """The spec as a mapping (JSON, which nvidia-ctk writes with ``--format=json``); the error names ``path``."""
    if text is None:
        raise KgnError(f"{path} does not exist")
    try:
        spec = json.loads(str(text))
    except ValueError as err:
        raise KgnError(f"{path} is not a JSON CDI spec: {err}") from None
    if not isinstance(spec, dict) or not isinstance(spec.get("devices"), list) or not spec.get("kind"):
        raise KgnError(f"{path} is not a CDI spec (no kind or no devices list)")
    return spec


def device_names(spec: dict) -> list:
    """The fully qualified device names (``nvidia.com/gpu=0``) in the spec's order."""
    kind = spec.get("kind", KIND)
    return [f"{kind}={d.get('name')}" for d in spec.get("devices") or [] if isinstance(d, dict) and d.get("name")]


def _edits(spec: dict) -> list:
    edits = [spec.get("containerEdits") or {}]
    edits += [(d.get("containerEdits") or {}) for d in spec.get("devices") or [] if isinstance(d, dict)]
    return [e for e in edits if isinstance(e, dict)]


def host_paths(spec: dict) -> list:
    """Every host path the spec makes the engine use: device nodes (``hostPath`` or ``path``), mount sources and
    hook programs, sorted, each once."""
    found = set()
    for edits in _edits(spec):
        for node in edits.get("deviceNodes") or []:
            path = node.get("hostPath") or node.get("path")
            if path:
                found.add(path)
        for mount in edits.get("mounts") or []:
            if mount.get("hostPath"):
                found.add(mount["hostPath"])
        for hook in edits.get("hooks") or []:
            if hook.get("path"):
                found.add(hook["path"])
    return sorted(found)


def driver_versions(spec: dict) -> list:
    """The driver versions the spec's libcuda / libnvidia-ml mounts are named after (one, for a sound spec)."""
    return sorted({m.group(1) for p in host_paths(spec) for m in [_VERSIONED.search(p)] if m})


def summary(spec: dict) -> dict:
    """What the report shows of a spec: kind, cdiVersion, devices, driver versions, the number of host paths."""
    return {"kind": spec.get("kind"), "cdi_version": spec.get("cdiVersion"), "devices": device_names(spec),
            "driver_versions": driver_versions(spec), "host_paths": len(host_paths(spec))}


def _row(check_id: str, status: str, text: str, **evidence) -> dict:
    return {"id": check_id, "title": TITLES[check_id], "status": status, "summary": text, "evidence": evidence}


def _gpu_rows(spec: dict, gpus: object) -> dict:
    if gpus is None:
        return _row("cdi_devices", "skipped", "skipped: no NVIDIA driver answers (nvidia-smi) to list the GPUs")
    kind = spec.get("kind", KIND)
    names = set(device_names(spec))
    missing = []
    for gpu in gpus:
        wanted = [f"{kind}={gpu['index']}", f"{kind}={gpu['uuid']}"]
        if not any(name in names for name in wanted):
            missing.append(f"GPU {gpu['index']} ({gpu['uuid']})")
    if missing:
        return _row("cdi_devices", "failed", f"the spec does not list {', '.join(missing)}", missing=missing,
                    devices=sorted(names))
    return _row("cdi_devices", "ok", f"{len(gpus)} GPU(s) listed by index or UUID ({', '.join(sorted(names))})",
                devices=sorted(names))


def _fresh_row(spec: dict, state: dict) -> dict:
    driver = state.get("driver") or {}
    version = driver.get("version")
    made_for = driver_versions(spec)
    if not version:
        return _row("cdi_fresh", "skipped", "skipped: no NVIDIA driver version is known on this node",
                    spec_driver=made_for)
    if made_for and made_for != [version]:
        return _row("cdi_fresh", "failed", f"stale: the spec was written for driver {', '.join(made_for)}, "
                    f"the node runs {version}", stale=True, spec_driver=made_for, driver=version)
    installed_at, written_at = driver.get("installed_at"), state.get("spec_mtime")
    if installed_at and written_at and written_at < installed_at:
        return _row("cdi_fresh", "failed", f"stale: the spec is older than the driver {version} on the node "
                    "(written before the driver was installed or upgraded)", stale=True, spec_driver=made_for,
                    driver=version, spec_mtime=written_at, driver_installed_at=installed_at)
    return _row("cdi_fresh", "ok", f"written for driver {version}", stale=False, driver=version)


def _paths_row(spec: dict, state: dict) -> dict:
    exists = state.get("paths") or {}
    names = host_paths(spec)
    missing = [p for p in names if exists.get(p) is False]
    if not missing:
        return _row("cdi_paths", "ok", f"all {len(names)} host paths exist", count=len(names))
    # without a driver that answers, its files being absent is what "no GPU here" means: a warning
    status = "failed" if (state.get("driver") or {}).get("answers") else "warn"
    shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
    return _row("cdi_paths", status, f"the spec names {len(missing)} path(s) that do not exist: {shown}",
                missing=missing, count=len(names))


def engine_row(engine: object, spec_dir: str) -> dict:
    """Whether the running engine has CDI on (``engine``: ``{name, enabled, spec_dirs}`` from the live engine;
    ``enabled`` None = not known) and scans ``spec_dir``."""
    engine = engine or {}
    name = engine.get("name") or "the engine"
    if engine.get("enabled") is None:
        return _row("cdi_engine", "skipped", f"skipped: {name} did not say whether CDI is on", engine=name)
    if not engine["enabled"]:
        return _row("cdi_engine", "failed", f"{name} has CDI off", engine=name, enabled=False)
    dirs = engine.get("spec_dirs") or []
    if dirs and spec_dir not in dirs:
        return _row("cdi_engine", "failed", f"{name} has CDI on but does not scan {spec_dir} (it scans "
                    f"{', '.join(dirs)})", engine=name, enabled=True, spec_dirs=dirs)
    return _row("cdi_engine", "ok", f"{name} has CDI on ({', '.join(dirs) or 'default folders'})", engine=name,
                enabled=True, spec_dirs=dirs)


def cdi_checks(state: object) -> list:
    """The CDI rows for one node. ``state``: ``spec_path``, ``spec_text`` (None: no file), ``spec_mtime``,
    ``driver`` {version, installed_at, answers} (what nvidia-smi and the NVML library show; None when no driver),
    ``gpus`` [{index, uuid}] (None when nvidia-smi does not answer), ``paths`` {path: exists} for the spec's host
    paths, ``engine`` {name, enabled, spec_dirs}, ``spec_dir``."""
    if not isinstance(state, dict):
        raise KgnError(f"cdi_checks: state must be a mapping, got {type(state).__name__}")
    path = state.get("spec_path") or "the CDI spec"
    rows = []
    try:
        spec = parse_spec(state.get("spec_text"), path)
    except KgnError as err:
        missing = state.get("spec_text") is None
        rows.append(_row("cdi_spec", "failed", f"no spec: {err}" if missing else str(err), path=path,
                         missing=missing))
        spec = None
    if spec is not None:
        rows.append(_row("cdi_spec", "ok", f"{path}: {len(device_names(spec))} devices ({spec.get('kind')}, "
                         f"cdiVersion {spec.get('cdiVersion')})", path=path, **summary(spec)))
        rows += [_gpu_rows(spec, state.get("gpus")), _fresh_row(spec, state), _paths_row(spec, state)]
    rows.append(engine_row(state.get("engine"), state.get("spec_dir") or path.rsplit("/", 1)[0]))
    return rows


def problems(rows: list) -> list:
    """The summaries of the failed rows (what a run says it repaired, or what is left)."""
    return [f"{r['title']}: {r['summary']}" for r in rows if r["status"] == "failed"]


def why_regenerated(before: object, after: str) -> str:
    """Why the spec on disk was replaced by what the generator gives now, in words: another driver, other devices,
    unreadable, or other content."""
    try:
        old = parse_spec(before)
    except KgnError as err:
        return f"it was unreadable: {err}"
    new = parse_spec(after)
    reasons = []
    if driver_versions(old) != driver_versions(new):
        reasons.append(f"stale: written for driver {', '.join(driver_versions(old)) or 'unknown'}, the node's "
                       f"driver is now {', '.join(driver_versions(new)) or 'unknown'}")
    gone = sorted(set(device_names(new)) - set(device_names(old)))
    extra = sorted(set(device_names(old)) - set(device_names(new)))
    if gone:
        reasons.append(f"it did not list {', '.join(gone)}")
    if extra:
        reasons.append(f"it listed {', '.join(extra)}, which the node no longer has")
    missing = sorted(set(host_paths(old)) - set(host_paths(new)))
    if missing and not reasons:
        reasons.append(f"it named {len(missing)} host path(s) the driver no longer has ({', '.join(missing[:2])}...)")
    return "; ".join(reasons) or "its content differed from what nvidia-ctk cdi generate writes now"
