"""Action of kgn.gpu_nodes.gpu_node_report: every host's row, the report printed and written, the run judged."""

from __future__ import annotations

import json
import os

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible_collections.kgn.gpu_nodes.plugins.module_utils import report
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.plugin_utils import run_report


class ActionModule(ActionBase):
    _supports_check_mode = True
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        args = run_report.plain(self._task.args)
        fail_on = args.get("fail_on", "failed")
        if fail_on not in ("never", "failed", "degraded"):
            raise AnsibleActionFail(f"gpu_node_report: fail_on is {fail_on!r}; accepted: never, failed, degraded")
        # the run's own mode (--check), not this task's: the report task itself runs in either
        check_mode = bool(task_vars.get("ansible_check_mode"))
        hosts = list(args.get("hosts") or [])
        meta = {"generated": run_report.stamp(),
                "inventory": ", ".join(run_report.plain(task_vars.get("ansible_inventory_sources") or [])),
                "limit": str(task_vars.get("ansible_limit") or "")}
        merged = args.get("merge")
        try:
            root = run_report.report_root(str(args.get("report_dir") or "reports"),
                                          str(task_vars.get("ansible_config_file") or ""),
                                          str(task_vars.get("playbook_dir") or ""))
            if merged:
                data = report.merge([_read_report(path, root) for path in merged])
                folder = report.write(data, root, data["meta"]["generated"], False, fleet=True)
            else:
                data = run_report.build(hosts, task_vars["hostvars"], run_report.plain(task_vars["groups"]), meta,
                                        check_mode)
                folder = report.write(data, root, meta["generated"], check_mode)
        except (KgnError, OSError, ValueError) as err:
            raise AnsibleActionFail(f"gpu_node_report: {err}") from None
        self._display.display(report.report_text(data))
        stopped = report.failed_steps(data["rows"])
        bad = run_report.verdict_failures(data, fail_on)
        # the report itself is in the files (and printed above), not in the result the run's output repeats
        result.update(changed=False, folder=folder, summary=data["summary"], stopped=stopped, not_ok=bad)
        where = f"{folder}/report.md"
        if stopped:
            result.update(failed=True, msg=f"The run stopped on {len(stopped)} host(s) before its end: "
                                           + "; ".join(stopped) + f". The report says what each gathered: {where}")
        elif bad:
            result.update(failed=True, msg=f"{', '.join(bad)} {'is' if len(bad) == 1 else 'are'} not ok "
                                           f"(gpu_node_verify_fail_on={fail_on}); the causes and fixes are in {where}")
        else:
            result["msg"] = f"report: {where}"
        return result


def _read_report(path, root):
    """``(name, report)`` of one run's report: its report.json, or the folder that holds one; a relative path is
    taken from the report folder first (``20261128T120000Z``), then from the current folder."""
    path = str(path)
    candidates = [path] if os.path.isabs(path) else [os.path.join(root, path), path]
    for candidate in candidates:
        found = os.path.join(candidate, "report.json") if os.path.isdir(candidate) else candidate
        if os.path.isfile(found):
            with open(found, encoding="utf-8") as handle:
                try:
                    return found, json.load(handle)
                except ValueError as err:
                    raise KgnError(f"{found} is not JSON: {err}") from None
    raise KgnError(f"no report at {path} (looked for {' and '.join(candidates)}, a report.json or its folder)")
