"""The lab's stand-in kube-scheduler accepts, per Kubernetes minor, what the real binary of that minor accepts.

The stand-in (lab/standins/kube-scheduler) plays the binary in molecule and the lab with its own validation code. Run
here with ``--write-config-to`` (decode and validate, then exit, as the real one does), for every supported minor:
the config this project generates for the minor is accepted, and a field or extension point a later minor added is
refused one minor before it (docs/versions.md A4).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.scheduler import scheduler
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.version import KUBERNETES_SUPPORTED

STANDIN = Path(__file__).resolve().parents[2] / "lab" / "standins" / "kube-scheduler"
G = "kubescheduler.config.k8s.io"
GPUSHARE = {"url_prefix": "http://127.0.0.1:32766/gpushare-scheduler", "filter_verb": "filter", "bind_verb": "bind",
            "managed_resources": [{"name": "aliyun.com/gpu-mem", "ignored_by_scheduler": False}]}
(_, FIRST), (_, LAST) = KUBERNETES_SUPPORTED


def standin(tmp_path: Path, version: str, doc: dict) -> subprocess.CompletedProcess:
    (tmp_path / "version").write_text(version)
    policy = doc.get("kind") == "Policy"
    config = tmp_path / ("policy.json" if policy else "config.yaml")
    config.write_text(json.dumps(doc) if policy else yaml.safe_dump(doc))
    flag = "--policy-config-file" if policy else "--config"
    return subprocess.run([sys.executable, str(STANDIN), f"{flag}={config}", f"--write-config-to={tmp_path / 'out'}"],
                          env={"KGN_STANDIN_VERSION_FILE": str(tmp_path / "version"), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize("minor", range(FIRST, LAST + 1))
def test_the_standin_of_each_minor_accepts_the_generated_config(tmp_path, minor):
    doc = scheduler.scheduler_config(f"1.{minor}.0", [GPUSHARE], "/etc/kubernetes/scheduler.conf")
    result = standin(tmp_path, f"1.{minor}.0", doc)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(("where", "field", "first"), [
    ("top", "delayCacheUntilActive", 28),
    ("point", "preEnqueue", 26),
    ("point", "placementGenerate", 36),
    ("point", "placementScore", 36),
    ("point", "podGroupPostFilter", 37),
])
def test_a_later_field_is_refused_one_minor_before_it_came(tmp_path, where, field, first):
    doc = {"apiVersion": f"{G}/v1", "kind": "KubeSchedulerConfiguration",
           "clientConnection": {"kubeconfig": "/etc/kubernetes/scheduler.conf"}}
    if where == "top":
        doc[field] = True
    else:
        doc["profiles"] = [{"schedulerName": "default-scheduler", "plugins": {field: {"enabled": [{"name": "X"}]}}}]
    assert standin(tmp_path, f"1.{first}.0", doc).returncode == 0
    before = standin(tmp_path, f"1.{first - 1}.9", doc)
    assert before.returncode == 1 and 'unknown field "' in before.stderr and field in before.stderr
