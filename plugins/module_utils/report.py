"""The verification report: one row per host, as data (report.json), Markdown (report.md) and a console table.

  report_row       one host's observations, expectations, diagnosed checks and verdict -> its row (the columns
                   below, ``checks``, and the ``changes`` verify.verify_host adds)
  report           every host's row -> ``{meta, summary, rows, problems, changes}``
  report_markdown  the report as Markdown: the table, the problems with their causes and fixes, what the run
                   changed and repaired per host, every check
  report_text      the same for the console
  report_folder / write  where a run's report goes and writing it: ``<root>/<UTC stamp>/`` and the ``latest``
                   link; a check-mode run writes ``<stamp>-check/`` and ``latest-check``, so ``latest`` stays the
                   last real run's

Columns: host, role, GPU model x count, driver, CUDA, runtime and its default, MIG, scheduler config variant,
labels (every label this project manages on the node), stack, verdict. A new column is one ``column()`` call
(a check that adds a column usually registers it next to itself); rows of an older report.json miss it, which the
Markdown shows as empty.
"""

import json
import os

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError

_ROLE_NAMES = {"control_plane": "control plane", "gpu_node": "GPU node"}
VERDICTS = ("ok", "degraded", "pending", "failed")
COLUMNS = []


class Column:
    def __init__(self, key, title, cell, gpu_node_only):
        self.key, self.title, self.cell, self.gpu_node_only = key, title, cell, gpu_node_only


def column(key, title, gpu_node_only=False, before="verdict"):
    """Register ``cell(observed, expected, checks) -> text`` as a report column, placed before ``before``."""
    def register(cell):
        if any(c.key == key for c in COLUMNS):
            raise KgnError(f"report column {key} is registered twice")
        keys = [c.key for c in COLUMNS]
        at = keys.index(before) if before in keys else len(COLUMNS)
        COLUMNS.insert(at, Column(key, title, cell, gpu_node_only))
        return cell
    return register


def _check(checks, check_id):
    for found in checks:
        if found.get("id") == check_id:
            return found
    return {}


@column("host", "host")
def _host_cell(observed, expected, checks):
    return expected.get("host") or "?"


@column("role", "role")
def _role_cell(observed, expected, checks):
    return " + ".join(_ROLE_NAMES.get(k, k) for k in expected.get("kinds") or []) or "?"


@column("gpu", "GPU", gpu_node_only=True)
def _gpu_cell(observed, expected, checks):
    gpu = observed.get("gpu") or {}
    smi_gpus = (gpu.get("smi") or {}).get("gpus") or []
    if smi_gpus:
        names = [g.get("name") or "?" for g in smi_gpus]
        return ", ".join(f"{n} x {names.count(n)}" for n in dict.fromkeys(names))
    devices = gpu.get("pci_devices") or []
    if devices:
        return f"NVIDIA {devices[0].get('device') or '?'} x {len(devices)} (PCI)"
    return "none" if gpu.get("read", True) else "not read"


@column("driver", "driver", gpu_node_only=True)
def _driver_cell(observed, expected, checks):
    gpu = observed.get("gpu") or {}
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
    return "not installed" if gpu.get("state_read", True) else "not recorded"


@column("cuda", "CUDA", gpu_node_only=True)
def _cuda_cell(observed, expected, checks):
    return ((observed.get("gpu") or {}).get("smi") or {}).get("cuda_version") or "-"


@column("runtime", "runtime (default)", gpu_node_only=True)
def _runtime_cell(observed, expected, checks):
    runtime = observed.get("runtime") or {}
    engine = runtime.get("engine") or "none"
    if engine == "none":
        return "not recorded" if runtime.get("state_missing") else "none"
    data = runtime.get(engine) or {}
    version = f" {data['version']}" if data.get("version") else ""
    if not data.get("answered"):
        return f"{engine}{version} (not answering)"
    # the runtime mode (CDI or the legacy hook) where the run recorded it
    mode = f", {data['runtime_mode']}" if data.get("runtime_mode") else ""
    return f"{engine}{version} ({data.get('default_runtime') or 'unset'}{mode})"


@column("mig", "MIG", gpu_node_only=True)
def _mig_cell(observed, expected, checks):
    """MIG mode and layout per GPU, as the nvidia_mig module last saw them ("-" when MIG is not managed)."""
    mig = observed.get("mig") or {}
    if not mig.get("recorded") or not mig.get("managed"):
        return "-"
    return "; ".join(f"GPU {g.get('index')}: {g.get('layout')}" + (" (mode change pending)"
                                                                    if g.get("pending") != g.get("mig") else "")
                     for g in mig.get("gpus") or []) or "no GPU"


@column("scheduler", "scheduler config")
def _scheduler_cell(observed, expected, checks):
    scheduler = expected.get("scheduler") or {}
    if not scheduler:
        return "-"
    if scheduler.get("state_missing") and scheduler.get("needs_extender"):
        cell = "not recorded"
    elif not scheduler.get("extender_paths"):
        cell = "unchanged (no extender needed)"
    else:
        cell = f"{scheduler.get('variant') or '?'} (--{(scheduler.get('flag') or '').lstrip('-')})"
    if scheduler.get("variant_minor"):  # kubernetes_version_allow_newer: a newer minor on a known variant
        cell += f"; {scheduler['variant_minor']} variant for a newer Kubernetes (kubernetes_version_allow_newer)"
    # a stack's own kube-scheduler (hami) runs next to the cluster's: its state is part of the answer
    own = [c for c in checks if c.get("id") == "own_scheduler_ready"]
    if own:
        cell += "; own scheduler: " + ", ".join(c.get("summary") or c.get("status") or "?" for c in own)
    return cell


@column("labels", "labels", gpu_node_only=True)
def _labels_cell(observed, expected, checks):
    """Every label this project manages on the node (its managed-labels annotation), then what is missing."""
    found = _check(checks, "node_labels")
    evidence = found.get("evidence") or {}
    if not found:
        return "-"
    if found.get("status") == "skipped" and not evidence.get("managed"):
        return found.get("summary") or "skipped"
    shown = dict(evidence.get("managed") or {})
    if not shown and found.get("status") == "ok":
        shown = dict(evidence.get("expected") or {})
    cell = ", ".join(f"{k}={v}" for k, v in sorted(shown.items())) or "none"
    if evidence.get("missing"):
        cell += f"; missing {', '.join(evidence['missing'])}"
    if evidence.get("wrong"):
        cell += f"; wrong {', '.join(sorted(evidence['wrong']))}"
    return cell


@column("stack", "stack")
def _stack_cell(observed, expected, checks):
    cell = ", ".join(expected.get("stacks") or []) or "-"
    registered = _check(checks, "node_annotations")
    if registered.get("status") in ("ok", "failed"):
        cell += " (GPUs registered)" if registered["status"] == "ok" else " (GPUs not registered)"
    return cell


@column("verdict", "verdict", before="")
def _verdict_cell(observed, expected, checks):
    return ""  # report_row fills it


def report_row(observed, expected, checks, verdict):
    """One host's report row (plain dict): the columns, ``verdict`` and its ``checks``."""
    for value, what in ((observed, "observed"), (expected, "expected")):
        if not isinstance(value, dict):
            raise KgnError(f"report_row: {what} must be a dict, got {type(value).__name__}")
    if not isinstance(checks, list):
        raise KgnError("report_row: checks must be the diagnosed list of checks")
    gpu_node = "gpu_node" in (expected.get("kinds") or [])
    row = {c.key: "-" if c.gpu_node_only and not gpu_node else c.cell(observed, expected, checks) for c in COLUMNS}
    row.update(verdict=verdict, checks=checks)
    return row


def report(rows, meta=None):
    """The whole report: ``{meta, summary, rows, problems, changes}``; rows sorted by host."""
    if not isinstance(rows, list) or not all(isinstance(r, dict) and "host" in r for r in rows):
        raise KgnError("report: input must be a list of report rows")
    rows = sorted(rows, key=lambda r: r["host"])
    summary = {v: sum(1 for r in rows if r.get("verdict") == v) for v in VERDICTS}
    problems = []
    for row in rows:
        for found in row.get("checks") or []:
            if found.get("status") in ("failed", "pending", "warn", "waived"):
                problems.append({"host": row["host"], "check": found.get("id"), "title": found.get("title"),
                                 "status": found.get("status"), "summary": found.get("summary"),
                                 "diagnosis": found.get("diagnosis") or []})
    changes = [{"host": row["host"], "concerns": row["changes"]} for row in rows if row.get("changes")]
    return {"meta": dict(meta or {}), "summary": summary, "rows": rows, "problems": problems, "changes": changes}


def _cell(value):
    return str(value).replace("|", "\\|").replace("\n", " ")


def _counts(summary):
    """'2 ok, 0 degraded, 1 failed', with the pending hosts of a check-mode run when there are any."""
    pending = summary.get("pending")
    pending = f"{pending} pending (this check-mode run would change them), " if pending else ""
    return (f"{summary.get('ok', 0)} ok, {summary.get('degraded', 0)} degraded, {pending}"
            f"{summary.get('failed', 0)} failed")


def change_lines(entry):
    """What one host's concerns changed and repaired, one line each (``- nvidia_driver: repaired: ...``)."""
    lines = []
    for concern in entry["concerns"]:
        would = "would change" if concern.get("check_mode") else "changed"
        items = [f"repaired: {r}" for r in concern.get("repaired") or []] + list(concern.get("changes") or [])
        if not items:
            items = [would]
        lines += [f"{concern['concern']}: {item}" for item in items]
    return lines


def report_markdown(data):
    """Markdown: a title, the summary, the table, each problem with causes and fixes, the changes, every check."""
    if not isinstance(data, dict) or "rows" not in data:
        raise KgnError("report_markdown: input must be the dict from report")
    meta = data.get("meta") or {}
    lines = ["# GPU node report", ""]
    if meta:
        lines += [", ".join(f"{k}: {v}" for k, v in meta.items() if k != "merged_from"), ""]
    for source in meta.get("merged_from") or []:
        lines.append(f"- merged from {source['report']} ({source['generated']}, limit "
                     f"{source['limit'] or '(none)'}): {len(source['kept'])} of its {len(source['hosts'])} row(s) kept")
    if meta.get("merged_from"):
        lines.append("")
    lines += [f"**{_counts(data.get('summary') or {})}**", ""]
    lines.append("| " + " | ".join(c.title for c in COLUMNS) + " |")
    lines.append("|" + "|".join("---" for _ in COLUMNS) + "|")
    for row in data["rows"]:
        lines.append("| " + " | ".join(_cell(row.get(c.key, "")) for c in COLUMNS) + " |")
    lines.append("")
    if data.get("problems"):
        lines += ["## Problems", ""]
        for problem in data["problems"]:
            lines.append(f"### {problem['host']}: {problem['title']} ({problem['status']})")
            lines += ["", _cell(problem["summary"]), ""]
            for item in problem["diagnosis"]:
                lines.append(f"- **Cause:** {item['cause']}")
                lines.append(f"  - **Fix:** {item['fix']}")
                if item.get("source"):
                    lines.append(f"  - *Source: {item['source']}*")
            lines.append("")
    if data.get("changes"):
        lines += ["## Changes", ""]
        for entry in data["changes"]:
            lines.append(f"- **{entry['host']}**")
            lines += [f"  - {_cell(line)}" for line in change_lines(entry)]
        lines.append("")
    lines += ["## Checks", ""]
    for row in data["rows"]:
        lines.append(f"- **{row['host']}** ({row['verdict']}): " + "; ".join(
            f"{c.get('id')} {c.get('status')}" for c in row.get("checks") or []))
    return "\n".join(lines) + "\n"


def report_text(data):
    """A fixed-width table for the console, then one line per problem with its causes, then the changes."""
    if not isinstance(data, dict) or "rows" not in data:
        raise KgnError("report_text: input must be the dict from report")
    table = [[c.title for c in COLUMNS]] + [[str(r.get(c.key, "")) for c in COLUMNS] for r in data["rows"]]
    widths = [max(len(line[i]) for line in table) for i in range(len(COLUMNS))]
    out = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(line)).rstrip() for line in table]
    out.insert(1, "  ".join("-" * w for w in widths))
    out.append("")
    out.append(_counts(data.get("summary") or {}))
    for problem in data.get("problems") or []:
        out.append(f"{problem['host']}: {problem['status'].upper()} {problem['title']}: {problem['summary']}")
        for item in problem["diagnosis"]:
            out.append(f"    cause: {item['cause']}")
            out.append(f"    fix:   {item['fix']}")
    for entry in data.get("changes") or []:
        out += [f"{entry['host']}: {line}" for line in change_lines(entry)]
    return "\n".join(out)


def merge(reports):
    """One fleet report from the reports of several runs (the slices of a sliced job, or separate runs): every host
    once, its row from the newest report that has it (``meta.generated``; on a tie, the later one given), the
    summary, problems and changes made again from those rows. ``meta.merged_from`` names each report (its
    generated stamp, inventory, limit, hosts, and the hosts whose row was kept from it). ``reports``: a list of
    ``(name, report dict)``, name being where it was read from."""
    if not isinstance(reports, list) or not reports:
        raise KgnError("merge: give at least one report (a run's report.json, or the folder that holds it)")
    newest, sources = {}, []
    for order, (name, data) in enumerate(reports):
        if not isinstance(data, dict) or not isinstance(data.get("rows"), list) or \
                not isinstance(data.get("meta"), dict):
            raise KgnError(f"merge: {name} is not a GPU node report (report.json with meta and rows)")
        stamp = str(data["meta"].get("generated") or "")
        if not stamp:
            raise KgnError(f"merge: {name} has no meta.generated stamp, so its rows cannot be ordered by age")
        if data["meta"].get("check_mode") or "merged_from" in data["meta"]:
            what = "a check-mode run's" if data["meta"].get("check_mode") else "already a merged"
            raise KgnError(f"merge: {name} is {what} report; merge the reports of real runs")
        if not all(isinstance(row, dict) and row.get("host") for row in data["rows"]):
            raise KgnError(f"merge: {name} has a row without a host; it is not a report this project wrote")
        hosts = [row["host"] for row in data["rows"]]
        sources.append({"report": name, "generated": stamp, "inventory": data["meta"].get("inventory", ""),
                        "limit": data["meta"].get("limit", ""), "hosts": hosts, "kept": []})
        for row in data["rows"]:
            if row["host"] not in newest or (stamp, order) >= newest[row["host"]][0]:
                newest[row["host"]] = ((stamp, order), row, len(sources) - 1)
    for host, (_, _, index) in sorted(newest.items()):
        sources[index]["kept"].append(host)
    order = sorted(range(len(sources)), key=lambda i: (sources[i]["generated"], i))
    meta = {"generated": max(source["generated"] for source in sources),
            "inventory": ", ".join(dict.fromkeys(s["inventory"] for s in sources if s["inventory"])),
            "merged_from": [sources[i] for i in order]}
    return report([row for _, row, _ in newest.values()], meta)


def report_folder(root, stamp, check_mode, fleet=False):
    """``(folder, link)``: where a run's report goes, and the link that names the newest of its kind (a merged fleet
    report: ``<stamp>-fleet``, ``latest-fleet``)."""
    if fleet:
        return os.path.join(root, f"{stamp}-fleet"), os.path.join(root, "latest-fleet")
    if check_mode:
        return os.path.join(root, f"{stamp}-check"), os.path.join(root, "latest-check")
    return os.path.join(root, stamp), os.path.join(root, "latest")


def write(data, root, stamp, check_mode, fleet=False):
    """Write report.json and report.md into the run's folder and point its link at it; return the folder."""
    folder, link = report_folder(root, stamp, check_mode, fleet)
    os.makedirs(folder, exist_ok=True)
    for name, text in (("report.json", json.dumps(data, indent=2, sort_keys=False, default=str) + "\n"),
                       ("report.md", report_markdown(data))):
        temporary = os.path.join(folder, f".{name}.tmp")
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temporary, os.path.join(folder, name))
    temporary = f"{link}.tmp"
    if os.path.lexists(temporary):
        os.remove(temporary)
    os.symlink(os.path.basename(folder), temporary)
    os.replace(temporary, link)
    return folder


def failed_steps(rows):
    """The hosts whose run stopped at a step (the host_reached check failed), with why."""
    found = []
    for row in rows:
        reached = _check(row.get("checks") or [], "host_reached")
        if reached.get("status") == "failed":
            found.append(f"{row['host']}: {reached.get('summary')}")
    return found
