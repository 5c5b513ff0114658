"""Render path of kube_scheduler_extender (kube_scheduler_extender_render_dir set): the
kgn.gpu_nodes.kube_scheduler_extender module plans without contacting the host and writes what apply would write.

One host per Kubernetes minor in VERSIONS (1.16 to 1.37), half kubeadm and half systemd, with the gpushare extender
(the reference clusters' values), rendered from inventory data alone (the installers' own layouts, said in
plan.assumed): the config is the filter's document, valid under the strict schema of its apiVersion narrowed to its
minor (tests/schemas/kube-scheduler), and the patch (manifest or drop-in) sets the variant's flag once. Every
rendered static pod, and the patched kubeadm manifest of every minor, is valid under the OpenAPI schema of its own
Kubernetes version (tests/kubernetes_schemas.py, strict). Hosts with a
recorded observation render exactly what apply writes (the user's extender kept, the Policy -> v1 switch, the
removal when no stack needs an extender); a host that needs no extender and does not run on this project's config
gets no scheduler file at all.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import kube_scheduler_schemas
import kubernetes_schemas
import pytest
import yaml
from playbook_runner import render_ok

ROOT = Path(__file__).parents[2]
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.version import KUBERNETES_SUPPORTED  # noqa: E402

VERSIONS = [
    "1.16.15",
    "1.18.20",
    "1.19.16",
    "1.21.14",
    "1.22.17",
    "1.23.1",
    "1.24.17",
    "1.25.16",
    "1.28.15",
    "1.29.14",
    "1.31.8",
    "1.35.4",
    "1.36.0",
    "1.37.0",
]
NODE_IP = "192.168.233.101"  # the kubeasz reference cluster's node
CONFIG = "/etc/kubernetes/scheduler-policy-config.yaml"
POLICY = "/etc/kubernetes/scheduler-policy-config.json"
MANIFEST = "/etc/kubernetes/manifests/kube-scheduler.yaml"
DROPIN = "/etc/systemd/system/kube-scheduler.service.d/90-kube-gpu-nodes-scheduler-config.conf"
UNIT = "/etc/systemd/system/kube-scheduler.service"
KUBEASZ_UNIT = """[Unit]
Description=Kubernetes Scheduler

[Service]
ExecStart=/opt/kube/bin/kube-scheduler \\
  --authentication-kubeconfig=/etc/kubernetes/kube-scheduler.kubeconfig \\
  --authorization-kubeconfig=/etc/kubernetes/kube-scheduler.kubeconfig \\
  --bind-address=0.0.0.0 \\
  --kubeconfig=/etc/kubernetes/kube-scheduler.kubeconfig \\
  --leader-elect=true \\
  --config=/etc/kubernetes/my-scheduler.yaml \\
  --v=2
Restart=always
"""
USER_CONFIG = """apiVersion: kubescheduler.config.k8s.io/v1beta2
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: /etc/kubernetes/kube-scheduler.kubeconfig
profiles:
- schedulerName: default-scheduler
extenders:
- urlPrefix: http://10.0.0.9:8888/mine
  filterVerb: filter
"""


def _load(name):
    return importlib.import_module(f"ansible_collections.kgn.gpu_nodes.plugins.module_utils.{name}")


def _schema_errors(doc: dict, version: str | None = None) -> list:
    return kube_scheduler_schemas.errors(doc, int(version.split(".")[1]) if version else None)


def _kubeadm_pod(version: str, *, ours: bool) -> str:
    """The lab's kubeadm manifest for ``version``; with ``ours`` as this project's patch left it at 1.18."""
    command = ["kube-scheduler", "--kubeconfig=/etc/kubernetes/scheduler.conf", "--bind-address=127.0.0.1",
               "--leader-elect=true"]
    mounts = [{"mountPath": "/etc/kubernetes/scheduler.conf", "name": "kubeconfig", "readOnly": True}]
    volumes = [{"hostPath": {"path": "/etc/kubernetes/scheduler.conf", "type": "FileOrCreate"}, "name": "kubeconfig"}]
    metadata = {"labels": {"component": "kube-scheduler"}, "name": "kube-scheduler", "namespace": "kube-system"}
    if ours:
        command.append(f"--policy-config-file={POLICY}")
        mounts.append({"mountPath": POLICY, "name": "kgn-scheduler-config", "readOnly": True})
        volumes.append({"hostPath": {"path": POLICY, "type": "File"}, "name": "kgn-scheduler-config"})
        metadata["annotations"] = {"kube-gpu-nodes/scheduler-config-sha256": "0" * 64}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {
        "containers": [{"command": command, "image": f"registry.k8s.io/kube-scheduler:v{version}",
                        "name": "kube-scheduler", "volumeMounts": mounts}],
        "hostNetwork": True, "volumes": volumes}}
    return yaml.safe_dump(pod, sort_keys=False)


OLD_POLICY = json.dumps({"kind": "Policy", "apiVersion": "v1", "extenders": [
    {"urlPrefix": "http://127.0.0.1:32766/gpushare-scheduler", "filterVerb": "filter", "bindVerb": "bind",
     "enableHttps": False, "nodeCacheCapable": True,
     "managedResources": [{"name": "aliyun.com/gpu-mem", "ignoredByScheduler": False}], "ignorable": False}]})


def _observed_hosts() -> dict:
    unit = {"name": "kube-scheduler.service", "load_state": "loaded", "fragment": UNIT, "dropins": [],
            "texts": {UNIT: KUBEASZ_UNIT}}
    return {
        # kubeasz with the user's own config: merged, the flag replaced in the drop-in
        "observed-kubeasz": {
            "kubernetes_version": "", "kube_scheduler_style": "auto", "gpu_sharing_stacks": ["gpushare"],
            "kgn_observed_kube_scheduler": {
                "manifest": {"path": MANIFEST, "text": None, "mode": None}, "unit": unit,
                "version": {"argv": ["/opt/kube/bin/kube-scheduler", "--version"], "rc": 0,
                            "output": "Kubernetes v1.23.1"},
                "files": {CONFIG: None, POLICY: None, "/etc/kubernetes/my-scheduler.yaml": USER_CONFIG},
                "exists": {"/etc/kubernetes/kube-scheduler.kubeconfig": True},
                "addresses": [NODE_IP, "172.17.0.1"], "default_address": NODE_IP, "kube_proxy_mode": "ipvs",
            },
        },
        # kubeadm upgraded from 1.18 (Policy) to 1.25: v1 document, Policy flag and volume gone
        "observed-kubeadm-upgrade": {
            "kubernetes_version": "1.25.16", "kube_scheduler_style": "auto", "gpu_sharing_stacks": ["gpushare"],
            "kube_scheduler_extender_url_mode": "loopback",
            "kgn_observed_kube_scheduler": {
                "manifest": {"path": MANIFEST, "text": _kubeadm_pod("1.25.16", ours=True), "mode": "0600"},
                "unit": {"name": "kube-scheduler.service", "load_state": "not-found"},
                "files": {CONFIG: None, POLICY: OLD_POLICY},
                "exists": {"/etc/kubernetes/scheduler.conf": True},
                "addresses": ["10.1.1.1"], "default_address": "10.1.1.1", "kube_proxy_mode": "iptables",
            },
        },
        # no stack needs an extender any more, the scheduler runs on our config: back to kubeadm's command
        "observed-kubeadm-removed": {
            "kubernetes_version": "1.18.20", "kube_scheduler_style": "auto", "gpu_sharing_stacks": [],
            "kgn_observed_kube_scheduler": {
                "manifest": {"path": MANIFEST, "text": _kubeadm_pod("1.18.20", ours=True), "mode": "0600"},
                "unit": {"name": "kube-scheduler.service", "load_state": "not-found"},
                "files": {CONFIG: None, POLICY: OLD_POLICY},
                "exists": {"/etc/kubernetes/scheduler.conf": True},
                "addresses": ["10.1.1.1"],
            },
        },
        # no stack needs an extender, nothing recorded: nothing is written for the scheduler
        "no-extender": {"kubernetes_version": "1.16.15", "kube_scheduler_style": "auto",
                        "gpu_sharing_stacks": ["nvidia_device_plugin"]},
    }


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("render")
    hosts = {}
    for index, version in enumerate(VERSIONS):
        hosts[f"cp-{version}"] = {
            "kubernetes_version": version,
            "kube_scheduler_style": "kubeadm" if index % 2 == 0 else "systemd",
            "gpu_sharing_stacks": ["gpushare"],
            "kube_scheduler_extender_node_ip": NODE_IP,
        }
    hosts.update(_observed_hosts())
    (tmp / "hosts.yml").write_text(yaml.safe_dump({"all": {"children": {"kube_control_plane": {"hosts": hosts}}}}))
    (tmp / "render.yml").write_text(
        yaml.safe_dump(
            [
                {
                    "name": "Render",
                    "hosts": "kube_control_plane",
                    "gather_facts": False,
                    "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
                    "tasks": [
                        {
                            "name": "Render the scheduler files",
                            "ansible.builtin.include_role": {"name": "kgn.gpu_nodes.kube_scheduler_extender"},
                            "vars": {"kube_scheduler_extender_render_dir": "{{ render_dir }}"},
                        }
                    ],
                }
            ]
        )
    )
    out = tmp / "out"
    render_ok("-i", str(tmp / "hosts.yml"), str(tmp / "render.yml"), "-e", f"render_dir={out}")
    return hosts, out


def _plan(out: Path, host: str) -> dict:
    return json.loads((out / host / "_plan" / "kube_scheduler.json").read_text())


def _files(out: Path, host: str) -> list:
    return sorted("/" + str(p.relative_to(out / host)) for p in (out / host).rglob("*")
                  if p.is_file() and "_plan" not in p.parts)


@pytest.mark.parametrize("version", VERSIONS)
def test_rendered_config_is_the_filter_document_and_passes_its_strict_schema(rendered, version):
    hosts, out = rendered
    scheduler, stacks = _load("scheduler.scheduler"), _load("stacks.stacks")
    variant = scheduler.scheduler_variant(version)
    style = hosts[f"cp-{version}"]["kube_scheduler_style"]
    kubeconfig = "/etc/kubernetes/scheduler.conf" if style == "kubeadm" else "/etc/kubernetes/kube-scheduler.kubeconfig"
    extenders = stacks.stack_extenders(["gpushare"], {"gpushare": f"http://{NODE_IP}:32766"})
    expected = scheduler.scheduler_config(version, extenders, kubeconfig, None)
    text = (out / f"cp-{version}" / variant["path"].lstrip("/")).read_text()
    doc = json.loads(text) if variant["format"] == "policy" else yaml.safe_load(text)
    assert doc == expected
    assert _schema_errors(doc, version) == []
    assert expected["extenders"][0]["urlPrefix"] == f"http://{NODE_IP}:32766/gpushare-scheduler"


@pytest.mark.parametrize("version", VERSIONS)
def test_rendered_patch_sets_the_variant_flag_once(rendered, version):
    hosts, out = rendered
    variant = _load("scheduler.scheduler").scheduler_variant(version)
    flag = f"{variant['flag']}={variant['path']}"
    other = "--config" if variant["flag"] == "--policy-config-file" else "--policy-config-file"
    host_dir = out / f"cp-{version}"
    if hosts[f"cp-{version}"]["kube_scheduler_style"] == "kubeadm":
        pod = yaml.safe_load((host_dir / MANIFEST.lstrip("/")).read_text())
        command = pod["spec"]["containers"][0]["command"]
        assert command.count(flag) == 1 and not [a for a in command if a.startswith(other)]
        assert [v["hostPath"]["path"] for v in pod["spec"]["volumes"]].count(variant["path"]) == 1
        registry = "registry.k8s.io" if int(version.split(".")[1]) >= 25 else "k8s.gcr.io"
        assert pod["spec"]["containers"][0]["image"] == f"{registry}/kube-scheduler:v{version}"
        assert _files(out, f"cp-{version}") == sorted([MANIFEST, variant["path"]])
    else:
        text = (host_dir / DROPIN.lstrip("/")).read_text()
        assert text.count(flag) == 1 and other not in text
        assert "--kubeconfig=/etc/kubernetes/kube-scheduler.kubeconfig" in text  # original flags kept
        assert _files(out, f"cp-{version}") == sorted([DROPIN, variant["path"]])


def test_a_render_without_observation_says_what_it_assumed(rendered):
    _, out = rendered
    assumed = " ".join(_plan(out, "cp-1.23.1")["assumed"])
    assert "kubeasz's ExecStart" in assumed and "no observation recorded" in assumed
    assert "kubeadm's own manifest" in " ".join(_plan(out, "cp-1.16.15")["assumed"])


def test_recorded_kubeasz_observation_keeps_the_users_config_and_flags(rendered):
    _, out = rendered
    plan = _plan(out, "observed-kubeasz")
    assert plan["assumed"] == [] and plan["version"] == "1.23.1" and plan["style"] == "systemd"
    doc = yaml.safe_load((out / "observed-kubeasz" / CONFIG.lstrip("/")).read_text())
    assert doc["apiVersion"] == "kubescheduler.config.k8s.io/v1beta3"
    assert doc["profiles"] == [{"schedulerName": "default-scheduler"}]
    assert [e["urlPrefix"] for e in doc["extenders"]] == [
        "http://10.0.0.9:8888/mine", f"http://{NODE_IP}:32766/gpushare-scheduler"]  # ipvs: the node IP
    assert _schema_errors(doc) == []
    dropin = (out / "observed-kubeasz" / DROPIN.lstrip("/")).read_text()
    assert "/etc/kubernetes/my-scheduler.yaml" not in dropin and dropin.count(f"--config={CONFIG}") == 1
    assert "--v=2" in dropin
    assert plan["health_url"] == "https://127.0.0.1:10259/healthz"


def test_recorded_kubeadm_upgrade_switches_policy_to_v1(rendered):
    _, out = rendered
    plan = _plan(out, "observed-kubeadm-upgrade")
    assert plan["remove"] == [{"path": POLICY, "content": None}]
    doc = yaml.safe_load((out / "observed-kubeadm-upgrade" / CONFIG.lstrip("/")).read_text())
    assert doc["apiVersion"] == "kubescheduler.config.k8s.io/v1" and _schema_errors(doc) == []
    assert [e["urlPrefix"] for e in doc["extenders"]] == ["http://127.0.0.1:32766/gpushare-scheduler"]
    pod = yaml.safe_load((out / "observed-kubeadm-upgrade" / MANIFEST.lstrip("/")).read_text())
    command = pod["spec"]["containers"][0]["command"]
    assert f"--config={CONFIG}" in command and not [a for a in command if a.startswith("--policy")]
    assert [v["hostPath"]["path"] for v in pod["spec"]["volumes"]] == ["/etc/kubernetes/scheduler.conf", CONFIG]


def test_recorded_kubeadm_on_our_config_without_extender_goes_back_to_kubeadms_command(rendered):
    _, out = rendered
    plan = _plan(out, "observed-kubeadm-removed")
    assert plan["action"] == "remove" and plan["left_alone"] is False
    assert plan["remove"] == [{"path": POLICY, "content": None}]
    assert _files(out, "observed-kubeadm-removed") == [MANIFEST]
    pod = yaml.safe_load((out / "observed-kubeadm-removed" / MANIFEST.lstrip("/")).read_text())
    assert yaml.safe_load(_kubeadm_pod("1.18.20", ours=False)) == pod


def test_no_extender_and_not_on_our_config_renders_nothing_for_the_scheduler(rendered):
    _, out = rendered
    assert _files(out, "no-extender") == []
    plan = _plan(out, "no-extender")
    assert plan["left_alone"] is True and plan["reason"].startswith("left alone: no extender needed")


def test_every_rendered_static_pod_is_valid_for_its_kubernetes_version(rendered):
    """The 1.16 pod carries no securityContext.seccompProfile (a 1.19 field), and so on: kubeadm's fields per minor."""
    hosts, out = rendered
    checked = []
    for host, settings in hosts.items():
        version = settings["kubernetes_version"] or "1.23.1"  # observed-kubeasz: detected from the binary
        checked += [host] * kubernetes_schemas.check_objects(kubernetes_schemas.api_objects(out / host), version, out)
    assert {f"cp-{v}" for i, v in enumerate(VERSIONS) if i % 2 == 0} <= set(checked)


@pytest.mark.parametrize("minor", range(KUBERNETES_SUPPORTED[0][1], KUBERNETES_SUPPORTED[1][1] + 1))
def test_the_patched_kubeadm_manifest_of_every_minor_is_valid_for_it(minor):
    """Every minor, not only VERSIONS: the plan from kubeadm's own manifest, patched, without Ansible."""
    scheduler_plan = _load("scheduler.scheduler_plan")
    version = f"1.{minor}.0"
    plan = scheduler_plan.scheduler_plan({"kubernetes_version": version, "style": "kubeadm", "stacks": ["gpushare"],
                                          "node_ip": NODE_IP}, {})
    [manifest] = [f for f in plan["files"] if f["path"] == MANIFEST]
    pod = yaml.safe_load(manifest["content"])
    kubernetes_schemas.validate(pod, version)
    assert "seccompProfile" in str(pod) or minor < 22
