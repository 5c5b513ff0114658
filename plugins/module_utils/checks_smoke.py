"""The smoke checks of a GPU node: a workload proves the GPU (docs/smoke.md), and the report's smoke column
(plugins/module_utils/checks.py says how a check is written).

``engine_smoke`` judges what the gpu_node_verify module ran on the node (smoke_live.run_engine_smoke: a container
through the engine kubelet uses), ``pod_smoke`` what the gpu_pod_smoke module ran on the node's API host (a pod per
stack). What each result means is decided in smoke.py and smoke_pod.py; here it becomes a check, its causes are
the smoke's CAUSES, and a smoke that is off, waived or not run shows "-" in the column.
"""

from ansible_collections.kgn.gpu_nodes.plugins.module_utils import smoke
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.checks import (
    GPU_NODE,
    cause,
    check,
    failed,
    ok,
    skipped,
    warn,
)
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.report import column

ENGINE_CONCERNS = ("nvidia_driver", "nvidia_container_toolkit", "container_runtime")
POD_CONCERNS = (*ENGINE_CONCERNS, "node_labels", "stacks")
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


def _off(want, kind):
    """Why the smoke of ``kind`` (engine, pod) did not run although it applies, or "" when it should have run."""
    if not (want.get("smoke") or {}).get(kind):
        return f"skipped: off (gpu_node_verify_{kind}_smoke: false)"
    if want.get("check_mode"):
        return CHECK_MODE
    return ""


@check("engine_smoke", "a GPU container through the engine kubelet uses sees the host's GPUs", kinds=(GPU_NODE,),
       concerns=ENGINE_CONCERNS, causes=_causes(_ENGINE_CAUSES))
def engine_smoke(seen, want, done):
    if "smoke" not in want:  # a row built without the smoke settings (an older caller): no line
        return None
    off = _off(want, "engine")
    if off:
        return skipped(off, off=True)
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
       concerns=POD_CONCERNS, causes=_causes(_POD_CAUSES) + _causes(_ENGINE_CAUSES, "pod_smoke_"))
def pod_smoke(seen, want, done):
    if "smoke" not in want:
        return None
    if not want.get("stacks"):
        return None  # no stack, no pod to ask for
    off = _off(want, "pod")
    if off:
        return skipped(off, off=True)
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
