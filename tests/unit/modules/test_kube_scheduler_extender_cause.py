"""kube_scheduler's failure message: the actual cause, never a healthy start log called an error.

The module's helpers are imported and fed what the host showed (the live scheduler, the unit's files, its log);
molecule's kube_scheduler_* scenarios run them against real systemd."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "kgn_kube_scheduler_module",
    Path(__file__).resolve().parents[3] / "plugins" / "modules" / "kube_scheduler_extender.py")
mod = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mod)

PLAN = {"style": "systemd", "unit": "kube-scheduler.service", "manifest": None,
        "argv": ["/opt/kube/bin/kube-scheduler", "--v=2", "--config=/etc/kubernetes/scheduler-policy-config.yaml"]}
HEALTHY_LOG = ["I0000 stand-in kube-scheduler: flags: --v=4",
               "I0000 stand-in kube-scheduler: serving securely on 0.0.0.0:10259"]


@pytest.fixture
def host_shows(monkeypatch):
    def shows(argv, log, runs_planned=False):
        live = {"processes": [{"pid": 7}] if argv else [], "runs_planned_flags": runs_planned, "argv": argv}
        monkeypatch.setattr(mod, "live_state", lambda module, plan: live)
        monkeypatch.setattr(mod, "_set_by", lambda module, plan: (
            "/etc/systemd/system/kube-scheduler.service.d/95-user-verbosity.conf", " ".join(argv)))
        monkeypatch.setattr(mod.host, "journal", lambda module, unit, since: log)
    return shows


def test_a_process_on_other_flags_is_the_cause_named_with_the_file_that_set_them(host_shows):
    host_shows(["/opt/kube/bin/kube-scheduler", "--v=4"], HEALTHY_LOG)
    cause = mod._cause(None, PLAN, 0, 0)
    assert cause == ("kube-scheduler runs `/opt/kube/bin/kube-scheduler --v=4`, set by "
                     "/etc/systemd/system/kube-scheduler.service.d/95-user-verbosity.conf, not the planned "
                     "`/opt/kube/bin/kube-scheduler --v=2 --config=/etc/kubernetes/scheduler-policy-config.yaml`")
    assert "error" not in cause  # the healthy start log is not quoted as an error


def test_the_schedulers_error_lines_are_quoted_when_it_logged_some(host_shows):
    host_shows([], ["I0000 starting", 'E0000 stand-in kube-scheduler: no kind "KubeSchedulerConfiguration" is '
                                      'registered for version "kubescheduler.config.k8s.io/v1beta1"'])
    assert mod._cause(None, PLAN, 0, 0).startswith("the scheduler's own error: E0000 stand-in kube-scheduler: no kind")


def test_no_error_logged_is_said_as_such(host_shows):
    host_shows([], HEALTHY_LOG)
    assert mod._cause(None, PLAN, 0, 0) == "the scheduler logged no error"


def test_systemd_shows_the_argv_it_runs():
    shown = ("{ path=/opt/kube/bin/kube-scheduler ; argv[]=/opt/kube/bin/kube-scheduler --v=4 --bind-address=0.0.0.0 ; "
             "ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }")
    assert mod.host.shown_argv(shown) == "/opt/kube/bin/kube-scheduler --v=4 --bind-address=0.0.0.0"
    assert mod.host.shown_argv("") == ""
