"""The smoke checks of a GPU node: a workload proves the GPU (docs/smoke.md), and the report's smoke column
(plugins/module_utils/verify/checks.py says how a check is written).

``engine_smoke`` judges what the gpu_node_verify module ran on the node (smoke_live.run_engine_smoke: a container
through the engine kubelet uses), ``pod_smoke`` what the gpu_pod_smoke module ran on the node's API host (a pod per
stack). What each result means is decided in smoke.py and smoke_pod.py; here it becomes a check, its causes are
the smoke's CAUSES, and a smoke that is off, waived or not run shows "-" in the column.
"""

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.report import column
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.smoke import smoke
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.verify.checks import (
    GPU_NODE,
    cause,
    check,
    failed,
    ok,
    skipped,
    warn,
)

ENGINE_CONCERNS = ("nvidia_driver", "nvidia_container_toolkit", "container_runtime")
POD_CONCERNS = (*ENGINE_CONCERNS, "node_labels", "stacks")
SOURCE_ISOLATION = "docs/isolation.md"
CHECK_MODE = "skipped: a check-mode run starts no container and creates no pod"
# the smoke's results -> the check's statuses (no GPU visible on a node without GPU degrades it, as gpu_present does)
_STATUS = {"ok": ok, "no_gpu": warn, "failed": failed, "skipped": skipped}


def _causes(ids, prefix="smoke_"):
    """The smoke's causes (smoke.CAUSES) as registered causes, matched on the result's ``cause``; ``prefix`` keeps
    the ids unique across checks (a pod can fail for a cause the engine smoke names too)."""
    return [cause(f"{prefix}{key}", when={"cause": key}, cause=smoke.CAUSES[key][0], fix=smoke.CAUSES[key][1],
                  source="docs/smoke.md") for key in ids]


_POD_CAUSES = [key for key in smoke.CAUSES if key.startswith("pod_")]
_ENGINE_CAUSES = [key for key in smoke.CAUSES if not key.startswith("pod_")]


def _with_smoke(seen, want):
    """A row built without the smoke settings (an older caller) has no smoke line."""
    return "smoke" in want


def _with_smoke_and_stack(seen, want):
    """No stack, no pod to ask for."""
    return "smoke" in want and bool(want.get("stacks"))


def _off(want, kind):
    """The skipped result of a smoke of ``kind`` (engine, pod) that applies but did not run, else None."""
    if not (want.get("smoke") or {}).get(kind):
        return skipped(f"skipped: off (gpu_node_verify_{kind}_smoke: false)", off=True)
    if want.get("check_mode"):
        return skipped(CHECK_MODE, off=True)
    return None


@check("engine_smoke", "a GPU container through the engine kubelet uses sees the host's GPUs", kinds=(GPU_NODE,),
       concerns=ENGINE_CONCERNS, causes=_causes(_ENGINE_CAUSES), applies=_with_smoke)
def engine_smoke(seen, want, done):
    off = _off(want, "engine")
    if off:
        return off
    result = (seen.get("smoke") or {}).get("engine")
    if not result:
        engine = (seen.get("runtime") or {}).get("engine") or "none"
        return skipped(f"skipped: not run (engine {engine})" if engine not in smoke.ENGINES
                       else "skipped: not run (the host was not read)")
    evidence = {k: result.get(k) for k in ("engine", "mode", "image", "runtime", "argv", "cleanup", "host", "stdout",
                                           "stderr", "seconds") if k in result}
    return _STATUS.get(result.get("status"), failed)(result.get("summary") or "", cause=result.get("cause") or "",
                                                     **evidence)


@check("pod_smoke", "a pod asking for the stack's GPU resource runs on the node and sees it", kinds=(GPU_NODE,),
       concerns=POD_CONCERNS, causes=_causes(_POD_CAUSES) + _causes(_ENGINE_CAUSES, "pod_smoke_"),
       applies=_with_smoke_and_stack)
def pod_smoke(seen, want, done):
    off = _off(want, "pod")
    if off:
        return off
    result = (seen.get("smoke") or {}).get("pod")
    if not result:
        return skipped("skipped: not run (its API host was not reached)")
    pods = list(result.get("pods") or [])
    found = [p.get("cause") for p in pods if p.get("status") in ("failed", "no_gpu") and p.get("cause")]
    first = result.get("cause") or (found[0] if found else "")
    summary = result.get("summary") or "; ".join(f"{p.get('stack')}: {p.get('summary')}" for p in pods)
    return _STATUS.get(result.get("status"), failed)(summary, cause=first, causes=list(dict.fromkeys(found)),
                                                     pods=pods, deleted=result.get("deleted"),
                                                     api_host=result.get("api_host", ""))


@check("gpu_isolation", "a container that asks for no GPU gets none, even with NVIDIA_VISIBLE_DEVICES=all",
       kinds=(GPU_NODE,), concerns=("nvidia_container_toolkit", "container_runtime", "stacks"),
       causes=[cause("isolation_open", when={"probe": "open", "decided": "closed"},
                     cause="the toolkit still hands GPUs to an unprivileged container that sets "
                           "NVIDIA_VISIBLE_DEVICES, although this project refuses it on this node: the toolkit's "
                           "config.toml was changed back, "
                           "or the engine's default runtime is not the one that reads it",
                     fix="run site.yml (it writes accept-nvidia-visible-devices-envvar-when-unprivileged = false "
                         "into /etc/nvidia-container-runtime/config.toml); look for a second config (XDG_CONFIG_HOME, "
                         "NVIDIA_CTK_CONFIG_FILE_PATH) in the engine's environment",
                     source=SOURCE_ISOLATION),
               cause("isolation_closed_needed", when={"probe": "closed", "decided": "open", "needed": True},
                     cause="the toolkit refuses NVIDIA_VISIBLE_DEVICES from unprivileged containers, but a stack of "
                           "this node hands GPUs out by nothing else: its pods start without their GPU",
                     fix="run site.yml (it writes the toolkit setting the node's stacks need), or move the node to a "
                         "stack that does not depend on the variable",
                     source=SOURCE_ISOLATION),
               cause("isolation_open_by_choice", when={"probe": "open", "decided": "open"}, status="warn",
                     cause="any container on this node may take every GPU by setting NVIDIA_VISIBLE_DEVICES",
                     fix="move the node to nvidia_device_plugin, hami (Kubernetes 1.23+) or nvidia_dra, then leave "
                         "kgn_gpu_envvar_unprivileged at auto",
                     source=SOURCE_ISOLATION)],
       applies=_with_smoke)
def gpu_isolation(seen, want, done):
    off = _off(want, "engine")
    if off:
        return off
    found = seen.get("smoke") or {}
    # the engine's container (gpu_node_verify) and the pod (gpu_pod_smoke, beside the stacks' pods)
    probes = {kind: probe for kind, probe in (("engine", found.get("isolation")),
                                              ("pod", (found.get("pod") or {}).get("isolation"))) if probe}
    if not probes:
        return skipped("skipped: not run (the engine smoke did not run)")
    statuses = {probe.get("status") for probe in probes.values()}
    summary = "; ".join(f"{kind}: {probe.get('summary')}" for kind, probe in probes.items())
    decided = want.get("isolation")
    evidence = {"probe": "open" if "open" in statuses else "closed" if "closed" in statuses else "not_run",
                "injected": sorted({i for probe in probes.values() for i in probe.get("injected") or []}),
                "decided": "" if not decided else "closed" if decided.get("refuse") else "open",
                "needed": bool((decided or {}).get("needed_by")), "why": (decided or {}).get("why", ""),
                "probes": probes}
    if evidence["probe"] == "not_run":
        return skipped(f"skipped: {summary}", **evidence)
    if not decided:
        return warn(f"{summary} (no recorded decision of the runtime role to compare with)", **evidence)
    if evidence["probe"] == evidence["decided"]:
        if evidence["probe"] == "closed":
            return ok(summary, **evidence)
        return warn(f"{summary}; {decided.get('why')}", **evidence)
    if evidence["probe"] == "closed" and not evidence["needed"]:
        return ok(f"{summary} (kgn_gpu_envvar_unprivileged is accept, but something of the node's own refuses it)",
                  **evidence)
    return failed(summary, **evidence)


def _part(found):
    """One smoke's part of the column: what it showed, or "-" (with why) when it did not count."""
    if not found:
        return None
    status, evidence = found.get("status"), found.get("evidence") or {}
    why = (evidence.get("cause") or "").replace("_", " ")
    if status == "skipped":
        if evidence.get("off"):
            return "-"
        reason = str(found.get("summary") or "").replace("skipped: ", "", 1)
        return f"- ({reason.split(' (', 1)[0]})" if reason else "-"
    if status == "waived":
        return f"- (waived: {why})" if why else "- (waived)"
    if status == "warn" and evidence.get("cause") == "no_gpu_visible":
        return "no GPU visible"
    if status in ("failed", "pending", "warn"):
        word = "FAILED" if status == "failed" else status
        return f"{word} ({why})" if why else word
    return status


@column("smoke", "smoke (engine; pod)", gpu_node_only=True)
def _smoke_cell(observed, expected, checks):
    """``engine: <what>; pod: <what>``; "-" when neither counted (off, waived, not run)."""
    parts = [(name, _part(next((c for c in checks if c.get("id") == f"{name}_smoke"), None)))
             for name in ("engine", "pod")]
    shown = [(name, part) for name, part in parts if part is not None]
    if not shown or all(part == "-" for _, part in shown):
        return "-"
    return "; ".join(f"{name}: {part}" for name, part in shown)


@column("isolation", "isolation", gpu_node_only=True)
def _isolation_cell(observed, expected, checks):
    """closed, open (and why it is allowed), or "-" when the probe did not run."""
    found = next((c for c in checks if c.get("id") == "gpu_isolation"), None)
    if not found or found.get("status") in ("skipped",):
        return "-"
    evidence = found.get("evidence") or {}
    word = evidence.get("probe") or "-"
    if found.get("status") == "failed":
        return f"FAILED ({word})"
    if found.get("status") == "waived":
        return f"{word} (waived)"
    if word == "open" and evidence.get("needed"):
        return "open (a stack needs it)"
    if word == "open":
        return "open (accepted)"
    return word
