"""Remember why each host stopped, so that the report of the same run can say it."""

from __future__ import annotations

DOCUMENTATION = r"""
---
name: run_failures
type: aggregate
short_description: Record the first failure or unreachability of each host for the report
description:
  - When a task fails on a host (not ignored, not rescued) or the host is unreachable, the first such event is
    kept as the host fact C(kgn_run_failure) (C(play), C(task), C(unreachable), C(msg)), for the rest of the
    same run only (it is not written to the fact cache).
  - The report of playbooks/verify.yml (role gpu_node_verify) shows it in the row of a host that has no
    verification result, instead of a bare "failed in an earlier play".
  - When a playbook that ends with the report (site.yml, playbooks/verify.yml) stops before it, because
    Ansible ends a run once every host of a play or of a serial batch has failed (the scheduler play changes
    one control plane at a time and stops at the first failure), the end of the run lists why each host
    stopped and says that no report was written.
  - Enable it in ansible.cfg with C(callbacks_enabled = kgn.gpu_nodes.run_failures) (the project's own
    ansible.cfg does).
requirements: []
author: kube-gpu-nodes
"""

from ansible.plugins.callback import CallbackBase  # noqa: E402

# The name of the play that writes the report (playbooks/report.yml, the last step of site.yml and verify.yml).
REPORT_PLAY = "Write the GPU node report"


def _message(result):
    data = result._result or {}
    msg = data.get("msg") or data.get("stderr") or data.get("reason") or ""
    if isinstance(msg, (list, dict)):
        msg = str(msg)
    return " ".join(str(msg).split())[:2000]


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "kgn.gpu_nodes.run_failures"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self._variables = None
        self._play = ""
        self._recorded = {}
        self._report_planned = self._report_started = False

    def v2_playbook_on_start(self, playbook):
        self._report_planned = any(play.get_name() == REPORT_PLAY for play in playbook.get_plays())

    def v2_playbook_on_play_start(self, play):
        self._variables = play.get_variable_manager()
        self._play = play.get_name()
        self._report_started = self._report_started or self._play == REPORT_PLAY

    def v2_playbook_on_stats(self, stats):
        if not self._report_planned or self._report_started or not self._recorded:
            return
        lines = [f"  - {host}: [{why['play']}] {why['task']}: "
                 + ("unreachable: " if why["unreachable"] else "") + why["msg"]
                 for host, why in sorted(self._recorded.items())]
        self._display.display(
            "kube-gpu-nodes: the run stopped before its report (Ansible ends a run when every host of a play, or of "
            "a serial batch, has failed). Why each host stopped:\n" + "\n".join(lines)
            + "\nNo report was written for this run: the latest one (gpu_node_verify_report_dir/latest) is older.",
            color="bright red", stderr=True)

    def _record(self, result, unreachable):
        host = result._host.get_name()
        if host in self._recorded or self._variables is None:
            return
        self._recorded[host] = {
            "play": self._play,
            "task": result._task.get_name(),
            "unreachable": unreachable,
            "msg": _message(result),
        }
        self._variables.set_nonpersistent_facts(host, {"kgn_run_failure": self._recorded[host]})

    def v2_runner_on_failed(self, result, ignore_errors=False):
        # a failure inside a block with a rescue section is handled by the play: not the host's end
        if not ignore_errors and not _rescued(result):
            self._record(result, unreachable=False)

    def v2_runner_on_unreachable(self, result):
        self._record(result, unreachable=True)


def _rescued(result):
    """Whether the failed task sits in a block that has a rescue section."""
    parent = result._task._parent
    while parent is not None:
        if getattr(parent, "rescue", None):
            return True
        parent = getattr(parent, "_parent", None)
    return False
