"""Remember why each host stopped and what it gathered, and write the run's report when Ansible ends the run early."""

from __future__ import annotations

DOCUMENTATION = r"""
---
name: run_failures
type: aggregate
short_description: Keep why each host stopped and what it gathered; write the report when the run ends early
description:
  - When a task fails on a host (not ignored, not rescued) or the host is unreachable, the first such event is
    kept as the host fact C(kgn_run_failure) (C(play), C(task), C(unreachable), C(msg)), for the rest of the
    same run only (it is not written to the fact cache). An unreachable host a task was delegated to, when the task
    ignores it (labels through an API host that does not answer), is the task's to say, not the host's stop.
  - A failed result that carries the project's facts (C(kgn_state_<concern>), C(kgn_observed_<concern>), which a
    module that failed after reading the node returns to say what it saw) keeps them on the host, so the report
    shows what the host gathered before it stopped.
  - Which concerns' states each host recorded in this run is kept as C(kgn_run_states), so that the row of a host
    that stopped judges those, not an older run's that the fact cache still holds.
  - The report of site.yml and playbooks/verify.yml (role gpu_node_verify) shows all of it in the row of a host that
    stopped.
  - When a playbook that ends with the report (site.yml, playbooks/verify.yml) stops before it, because Ansible ends
    a run once every host of a play or of a serial batch has failed (a one-node fleet whose node failed), this
    callback writes that report itself, with the same rows (plugins/plugin_utils/run_report.py), and lists why each
    host stopped. The run's exit code still says it failed.
  - Enable it in ansible.cfg with C(callbacks_enabled = kgn.gpu_nodes.run_failures) (the project's own
    ansible.cfg does).
requirements: []
author: kube-gpu-nodes
"""

import os  # noqa: E402

from ansible import constants as C  # noqa: E402
from ansible import context  # noqa: E402
from ansible.plugins.callback import CallbackBase  # noqa: E402

# The name of the play that writes the report (playbooks/report.yml, the last step of site.yml and verify.yml).
REPORT_PLAY = "Write the GPU node report"
# The groups the report has a row for (the gpu_node_verify role's defaults).
REPORTED = "gpu_nodes:kube_control_plane"


def _message(result):
    data = result._result or {}
    msg = data.get("msg") or data.get("stderr") or data.get("reason") or ""
    if isinstance(msg, (list, dict)):
        msg = str(msg)
    return " ".join(str(msg).split())[:2000]


def _timed_out(result):
    """Whether Ansible stopped the task at its timeout (ansible-core 2.19 marks the result ``timedout``; 2.16 says
    only "failed to execute in the expected time frame")."""
    data = result._result or {}
    return bool(data.get("timedout")) or "failed to execute in the expected time frame" in str(data.get("msg") or "")


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "kgn.gpu_nodes.run_failures"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self._variables = None
        self._play = None
        self._play_name = ""
        self._recorded = {}
        self._states = {}  # host -> the concerns whose kgn_state_<concern> this run recorded
        self._playbook_dir = ""
        self._report_planned = self._report_started = False

    def v2_playbook_on_start(self, playbook):
        self._playbook_dir = getattr(playbook, "_basedir", "") or ""
        self._report_planned = any(play.get_name() == REPORT_PLAY for play in playbook.get_plays())

    def v2_playbook_on_play_start(self, play):
        self._variables = play.get_variable_manager()
        self._play = play
        self._play_name = play.get_name()
        self._report_started = self._report_started or self._play_name == REPORT_PLAY

    def v2_playbook_on_stats(self, stats):
        if not self._report_planned or self._report_started or self._variables is None:
            return
        lines = [f"  - {host}: [{why['play']}] {why['task']}: "
                 + ("unreachable: " if why["unreachable"] else "") + why["msg"]
                 for host, why in sorted(self._recorded.items())]
        try:
            where = self._write_report()
        except Exception as err:  # say why the report is missing, never hide the run's own end
            where = f"none: writing it failed ({err}); the latest one (gpu_node_verify_report_dir/latest) is older"
        self._display.display(
            "kube-gpu-nodes: the run stopped before its report play (Ansible ends a run when every host of a play, "
            "or of a serial batch, has failed). Why each host stopped:\n" + ("\n".join(lines) or "  (none recorded)")
            + f"\nThe report of this run, every host's row with what it gathered: {where}",
            color="bright red", stderr=True)

    def _write_report(self):
        """The report of this run, as the report play would write it: every host's row."""
        from ansible_collections.kgn.gpu_nodes.plugins.module_utils import report
        from ansible_collections.kgn.gpu_nodes.plugins.plugin_utils import run_report

        inventory = self._variables._inventory
        all_vars = self._variables.get_vars(play=self._play, include_hostvars=True)
        hostvars = all_vars["hostvars"]
        groups = run_report.plain(all_vars["groups"])
        hosts = [h.name for h in inventory.get_hosts(REPORTED, ignore_restrictions=True)]
        local = hostvars["localhost"] if "localhost" in hostvars else {}  # noqa: SIM401 (Ansible's hostvars)
        check_mode = bool(context.CLIARGS.get("check"))
        meta = {"generated": run_report.stamp(), "inventory": ", ".join(str(s) for s in inventory._sources),
                "limit": str(context.CLIARGS.get("subset") or ""),
                "written_by": "the run_failures callback: the run stopped before its report play"}
        data = run_report.build(hosts, hostvars, groups, meta, check_mode)
        report_dir = str(local.get("gpu_node_verify_report_dir") or "reports") if hasattr(local, "get") else "reports"
        root = run_report.report_root(report_dir, C.CONFIG_FILE or "", self._playbook_dir or os.getcwd())
        folder = report.write(data, root, meta["generated"], check_mode)
        self._display.display(report.report_text(data))
        return f"{folder}/report.md"

    def _record(self, result, unreachable):
        host = result._host.get_name()
        if host in self._recorded or self._variables is None:
            return
        kept = getattr(self._variables, "_nonpersistent_fact_cache", {}).get(host, {}).get("kgn_run_failure")
        if kept:  # a step kept its failure with the host (its rescue); the gate after it only ends the host
            self._recorded[host] = kept
            return
        self._recorded[host] = {
            "play": self._play_name,
            "task": result._task.get_name(),
            "unreachable": unreachable,
            "msg": _message(result),
            # the task's timeout (kgn_task_timeout) stopped it: the host hung, it did not say no
            "timed_out": _timed_out(result),
            "timeout": getattr(result._task, "timeout", None) or 0,
        }
        self._variables.set_nonpersistent_facts(host, {"kgn_run_failure": self._recorded[host]})

    def _note_states(self, result, facts):
        """Which concerns' states this run recorded on the host (kgn_run_states): a stopped host's row judges only
        those, not an older run's that the fact cache still holds."""
        host = result._host.get_name()
        found = {k[len("kgn_state_"):] for k in facts if k.startswith("kgn_state_")}
        if found - self._states.get(host, set()) and self._variables is not None:
            self._states[host] = self._states.get(host, set()) | found
            self._variables.set_nonpersistent_facts(host, {"kgn_run_states": sorted(self._states[host])})

    def _keep_gathered(self, result):
        """The project's facts a failed module still returned: what it read before it stopped."""
        facts = (result._result or {}).get("ansible_facts") or {}
        kept = {k: v for k, v in facts.items() if k.startswith(("kgn_state_", "kgn_observed_"))}
        if kept and self._variables is not None:
            self._variables.set_nonpersistent_facts(result._host.get_name(), kept)
            self._note_states(result, kept)

    def v2_runner_on_ok(self, result):
        self._note_states(result, (result._result or {}).get("ansible_facts") or {})

    def v2_runner_on_failed(self, result, ignore_errors=False):
        if ignore_errors:
            return
        self._keep_gathered(result)
        # a failure inside a block with a rescue section is handled by the play: not the host's end
        if not _rescued(result):
            self._record(result, unreachable=False)

    def v2_runner_on_unreachable(self, result):
        task = result._task
        if task.ignore_unreachable and task.delegate_to:
            return  # an API host that does not answer: the delegated task says so, the host itself goes on
        self._record(result, unreachable=True)


def _rescued(result):
    """Whether the failed task sits in a block that has a rescue section."""
    parent = result._task._parent
    while parent is not None:
        if getattr(parent, "rescue", None):
            return True
        parent = getattr(parent, "_parent", None)
    return False
