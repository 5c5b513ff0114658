"""kube_scheduler's failure message: the actual cause, never a healthy start log called an error.

The module's helpers are imported and fed what the host showed (the live scheduler, the unit's files, its log);
molecule's kube_scheduler_* scenarios run them against real systemd."""

from __future__ import annotations

import importlib.util
import os
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


def test_without_crictl_the_kubelets_log_file_of_the_newest_container_gives_the_words(tmp_path, monkeypatch):
    """A kubeadm node without crictl: the kubelet's own log files of the scheduler's containers (CRI format),
    the newest written since the change (seen on a real kubelet v1.36.3 in the lab, which has no crictl)."""
    old = tmp_path / "kube-system_kube-scheduler-cp_1111" / "kube-scheduler" / "0.log"
    new = tmp_path / "kube-system_kube-scheduler-cp_2222" / "kube-scheduler" / "1.log"
    for path in (old, new):
        path.parent.mkdir(parents=True)
    old.write_text("2026-11-29T00:00:00.1Z stderr F I1129 serving securely on 127.0.0.1:10259\n")
    new.write_text("2026-11-29T00:01:00.1Z stderr F I1129 Generated self-signed cert in-memory\n"
                   '2026-11-29T00:01:00.2Z stderr F E1129 00:01:00.2 1 run.go:72] "command failed" '
                   'err="no kind \\"KubeSchedulerConfiguration\\" is registered for version \\"v1beta1\\""\n')
    os.utime(old, (1000, 1000))
    os.utime(new, (2000, 2000))
    monkeypatch.setattr(mod, "POD_LOGS", str(tmp_path / "kube-system_kube-scheduler-*" / "kube-scheduler" / "*.log"))
    monkeypatch.setattr(mod.host, "run", lambda module, argv, timeout=None: (127, "", "crictl: not found"))
    plan = dict(PLAN, style="kubeadm")
    assert mod._own_words(None, plan, 1500, 0) == [
        'E1129 00:01:00.2 1 run.go:72] "command failed" err="no kind \\"KubeSchedulerConfiguration\\" is registered '
        'for version \\"v1beta1\\""']
    # nothing written since the change: no words (an older container's healthy log is not the cause)
    assert mod._own_words(None, plan, 3000, 0) == []
    # a pod's folder the kubelet removed between the listing and the read is passed over
    listed = mod.glob.glob(mod.POD_LOGS)
    monkeypatch.setattr(mod.glob, "glob", lambda pattern: [*listed, str(tmp_path / "gone" / "0.log")])
    assert mod._own_words(None, plan, 1500, 0)[0].startswith("E1129 00:01:00.2 1 run.go:72]")
