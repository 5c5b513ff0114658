"""The verification report: one row per host, as data, Markdown and a console table.

Filters (documentation: the sidecar ``<filter>.yml`` files):
  report_row       one host's observations + expectations + diagnosed checks -> report row
  report_unreached hosts without a result -> failed rows saying so
  report           rows of every host -> the report (summary, rows, problems with causes)
  report_markdown  the report -> Markdown (table, then every problem with its causes and fixes)
  report_text      the report -> a plain-text table for the console

Columns of the per-run report (roles/gpu_node_verify/README.md): host, role, GPU model x count, driver,
CUDA, runtime and its default, scheduler config variant, labels, stack, the smoke tests (engine; pod), verdict.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.smoke import smoke_cell

COLUMNS = (
    ("host", "host"),
    ("role", "role"),
    ("gpu", "GPU"),
    ("driver", "driver"),
    ("cuda", "CUDA"),
    ("runtime", "runtime (default)"),
    ("mig", "MIG"),
    ("scheduler", "scheduler config"),
    ("labels", "labels"),
    ("stack", "stack"),
    ("smoke", "smoke (engine; pod)"),
    ("verdict", "verdict"),
)
_ROLE_NAMES = {"control_plane": "control plane", "gpu_node": "GPU node"}


def _status(checks, check_id):
    for check in checks:
        if check.get("id") == check_id:
            return check
    return {}


def _gpu_cell(gpu):
    smi_gpus = (gpu.get("smi") or {}).get("gpus") or []
    if smi_gpus:
        names = [g.get("name") or "?" for g in smi_gpus]
        return ", ".join(f"{n} x {names.count(n)}" for n in dict.fromkeys(names))
    devices = gpu.get("pci_devices") or []
    if devices:
        return f"NVIDIA {devices[0].get('device') or '?'} x {len(devices)} (PCI)"
    return "none"


def _driver_cell(gpu):
    smi_gpus = (gpu.get("smi") or {}).get("gpus") or []
    adopted = " adopted" if gpu.get("adopted") else ""
    if smi_gpus and smi_gpus[0].get("driver_version"):
        return smi_gpus[0]["driver_version"] + (f" ({adopted.strip()})" if adopted else "")
    if gpu.get("kernel_driver_version"):
        return f"{gpu['kernel_driver_version']} (module{',' + adopted if adopted else ''})"
    if adopted:
        return f"{gpu['adopted'].get('version') or 'version unknown'} (adopted, not loaded)"
    if gpu.get("package_version"):
        return f"{gpu['package_version']} (installed, not loaded)"
    return "not installed"


def _runtime_cell(runtime):
    engine = runtime.get("engine") or "none"
    if engine == "none":
        return "none"
    data = runtime.get(engine) or {}
    version = f" {data['version']}" if data.get("version") else ""
    if not data.get("answered"):
        return f"{engine}{version} (not answering)"
    return f"{engine}{version} ({data.get('default_runtime') or 'unset'})"


def _labels_cell(checks):
    check = _status(checks, "node_labels")
    evidence = check.get("evidence") or {}
    if check.get("status") == "skipped":
        return check.get("summary") or "skipped"
    if check.get("status") == "failed":
        return f"missing {', '.join(evidence.get('missing') or [])}".strip() if evidence.get("missing") else "wrong"
    expected = evidence.get("expected") or {}
    return ", ".join(f"{k}={v}" for k, v in sorted(expected.items())) or "-"


def _scheduler_cell(scheduler, checks):
    if not scheduler:
        return "-"
    if not scheduler.get("extender_paths"):
        cell = "unchanged (no extender needed)"
    else:
        cell = f"{scheduler.get('variant') or '?'} (--{(scheduler.get('flag') or '').lstrip('-')})"
    # a stack's own kube-scheduler (hami) runs next to the cluster's: its state is part of the answer
    own = [c for c in checks if c.get("id") == "own_scheduler_ready"]
    if own:
        cell += "; own scheduler: " + ", ".join(c.get("summary") or c.get("status") or "?" for c in own)
    return cell


def _stack_cell(expected, checks):
    cell = ", ".join(expected.get("stacks") or []) or "-"
    registered = _status(checks, "node_annotations")
    if registered.get("status") in ("ok", "failed"):
        cell += " (GPUs registered)" if registered["status"] == "ok" else " (GPUs not registered)"
    return cell


def _mig_cell(mig):
    """MIG mode and layout per GPU, as the nvidia_mig module last saw them ("-" when MIG is not managed)."""
    if not mig or not mig.get("recorded") or not mig.get("managed"):
        return "-"
    return "; ".join(f"GPU {g.get('index')}: {g.get('layout')}" + (" (mode change pending)"
                                                                    if g.get("pending") != g.get("mig") else "")
                     for g in mig.get("gpus") or []) or "no GPU"


def report_row(observed, expected, checks, verdict):
    """One host's report row (plain dict): the table columns plus its checks."""
    for value, what in ((observed, "observed"), (expected, "expected")):
        if not isinstance(value, dict):
            raise AnsibleFilterError(f"report_row: {what} must be a dict, got {type(value).__name__}")
    if not isinstance(checks, list):
        raise AnsibleFilterError("report_row: checks must be the list from diagnose")
    kinds = expected.get("kinds") or []
    gpu_node = "gpu_node" in kinds
    scheduler = expected.get("scheduler") or {}
    row = {
        "host": expected.get("host") or "?",
        "role": " + ".join(_ROLE_NAMES.get(k, k) for k in kinds),
        "gpu": _gpu_cell(observed.get("gpu") or {}) if gpu_node else "-",
        "driver": _driver_cell(observed.get("gpu") or {}) if gpu_node else "-",
        "cuda": ((observed.get("gpu") or {}).get("smi") or {}).get("cuda_version") or "-" if gpu_node else "-",
        "runtime": _runtime_cell(observed.get("runtime") or {}) if gpu_node else "-",
        "mig": _mig_cell(observed.get("mig") or {}) if gpu_node else "-",
        "scheduler": _scheduler_cell(scheduler, checks),
        "labels": _labels_cell(checks) if gpu_node else "-",
        "stack": _stack_cell(expected, checks),
        "smoke": smoke_cell(checks) if gpu_node else "-",
        "verdict": verdict,
        "checks": checks,
    }
    return row


def _unreached_diagnosis(failure):
    if not isinstance(failure, dict) or not failure:
        return ("no verification result: the host was unreachable or failed in an earlier play",
                {"id": "host_not_verified",
                 "cause": "the host was unreachable, or an earlier play failed on it so verification never ran "
                          "(enable the kgn.gpu_nodes.run_failures callback to see why here)",
                 "fix": "read the failed task in the run's output (or the runner artifacts); fix it and re-run",
                 "source": ""})
    where = f"task '{failure.get('task')}' of play '{failure.get('play')}'"
    if failure.get("unreachable"):
        return (f"unreachable: {failure.get('msg')}",
                {"id": "host_unreachable",
                 "cause": f"Ansible could not reach the host ({where}): {failure.get('msg')}",
                 "fix": "check that the host is up and that Ansible can log in (address, user, key, Python), "
                        "then re-run",
                 "source": ""})
    return (f"failed in {where}: {failure.get('msg')}",
            {"id": "host_failed",
             "cause": f"{where} failed on this host, so verification never ran: {failure.get('msg')}",
             "fix": "fix what the message names and re-run; nothing after that task ran on this host",
             "source": ""})


def report_unreached(hosts, hostvars=None):
    """Rows for hosts that have no verification result (unreachable, or failed in an earlier play), with the
    cause recorded by the kgn.gpu_nodes.run_failures callback when it is enabled."""
    if not isinstance(hosts, list):
        raise AnsibleFilterError(f"report_unreached: input must be a list of host names, got {hosts!r}")
    rows = []
    for host in hosts:
        failure = hostvars[host].get("kgn_run_failure") if hostvars is not None and host in hostvars else None
        summary, diagnosis = _unreached_diagnosis(failure)
        check = {
            "id": "host_reached",
            "title": "host reached and verified",
            "status": "failed",
            "summary": summary,
            "evidence": {"failure": failure} if failure else {},
            "diagnosis": [diagnosis],
        }
        row = {key: "-" for key, _ in COLUMNS}
        row.update({"host": str(host), "role": "?", "verdict": "failed", "checks": [check]})
        rows.append(row)
    return rows


def report(rows, meta=None):
    """The whole report: {meta, summary, rows, problems}; rows sorted by host."""
    if not isinstance(rows, list) or not all(isinstance(r, dict) and "host" in r for r in rows):
        raise AnsibleFilterError("report: input must be a list of rows from report_row")
    rows = sorted(rows, key=lambda r: r["host"])
    summary = {v: sum(1 for r in rows if r.get("verdict") == v) for v in ("ok", "degraded", "pending", "failed")}
    problems = []
    for row in rows:
        for check in row.get("checks") or []:
            if check.get("status") in ("failed", "pending", "warn"):
                problems.append({
                    "host": row["host"],
                    "check": check.get("id"),
                    "title": check.get("title"),
                    "status": check.get("status"),
                    "summary": check.get("summary"),
                    "diagnosis": check.get("diagnosis") or [],
                })
    return {"meta": dict(meta or {}), "summary": summary, "rows": rows, "problems": problems}


def _cell(value):
    return str(value).replace("|", "\\|").replace("\n", " ")


def _counts(summary):
    """'2 ok, 0 degraded, 1 failed', with the pending hosts of a check-mode run when there are any."""
    pending = summary.get("pending")
    pending = f"{pending} pending (this check-mode run would change them), " if pending else ""
    return (f"{summary.get('ok', 0)} ok, {summary.get('degraded', 0)} degraded, {pending}"
            f"{summary.get('failed', 0)} failed")


def report_markdown(report):
    """Markdown: a title, the summary, the table, then each problem with causes and fixes."""
    if not isinstance(report, dict) or "rows" not in report:
        raise AnsibleFilterError("report_markdown: input must be the dict from report")
    meta = report.get("meta") or {}
    summary = report.get("summary") or {}
    lines = ["# GPU node report", ""]
    if meta:
        lines += [", ".join(f"{k}: {v}" for k, v in meta.items()), ""]
    lines += [f"**{_counts(summary)}**", ""]
    lines.append("| " + " | ".join(title for _, title in COLUMNS) + " |")
    lines.append("|" + "|".join("---" for _ in COLUMNS) + "|")
    for row in report["rows"]:
        lines.append("| " + " | ".join(_cell(row.get(key, "")) for key, _ in COLUMNS) + " |")
    lines.append("")
    if report.get("problems"):
        lines += ["## Problems", ""]
        for problem in report["problems"]:
            lines.append(f"### {problem['host']}: {problem['title']} ({problem['status']})")
            lines += ["", _cell(problem["summary"]), ""]
            for item in problem["diagnosis"]:
                lines.append(f"- **Cause:** {item['cause']}")
                lines.append(f"  - **Fix:** {item['fix']}")
                if item.get("source"):
                    lines.append(f"  - *Source: {item['source']}*")
            lines.append("")
    lines += ["## Checks", ""]
    for row in report["rows"]:
        lines.append(f"- **{row['host']}** ({row['verdict']}): " + "; ".join(
            f"{c.get('id')} {c.get('status')}" for c in row.get("checks") or []))
    return "\n".join(lines) + "\n"


def report_text(report):
    """A fixed-width table for the console, then one line per problem with its first cause."""
    if not isinstance(report, dict) or "rows" not in report:
        raise AnsibleFilterError("report_text: input must be the dict from report")
    table = [[title for _, title in COLUMNS]] + [[str(r.get(k, "")) for k, _ in COLUMNS] for r in report["rows"]]
    widths = [max(len(line[i]) for line in table) for i in range(len(COLUMNS))]
    out = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(line)).rstrip() for line in table]
    out.insert(1, "  ".join("-" * w for w in widths))
    summary = report.get("summary") or {}
    out.append("")
    out.append(_counts(summary))
    for problem in report.get("problems") or []:
        out.append(f"{problem['host']}: {problem['status'].upper()} {problem['title']}: {problem['summary']}")
        for item in problem["diagnosis"]:
            out.append(f"    cause: {item['cause']}")
            out.append(f"    fix:   {item['fix']}")
    return "\n".join(out)


class FilterModule:
    """Report filters."""

    def filters(self):
        return {
            "report_row": report_row,
            "report": report,
            "report_unreached": report_unreached,
            "report_markdown": report_markdown,
            "report_text": report_text,
        }
