"""Render-only path of kube_scheduler_extender: the rendered config is exactly the filter's document.

Runs playbooks/render.yml's role entry point (tasks/render.yml) for one host per Kubernetes minor of
issue 8's list, half kubeadm and half systemd, with the gpushare extender (seed values), and checks
the config file against scheduler_config and the patch (manifest or drop-in) for the flag.
"""

import importlib.util
import sys
from pathlib import Path

import pytest
import yaml
from playbook_runner import render_ok

ROOT = Path(__file__).parents[2]
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
]
NODE_IP = "192.168.233.101"  # the kubeasz seed's node


def _load(name):
    return importlib.import_module(f"ansible_collections.kgn.gpu_nodes.plugins.module_utils.{name}")


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
                            "ansible.builtin.include_role": {"name": "kube_scheduler_extender", "tasks_from": "render"},
                        }
                    ],
                }
            ]
        )
    )
    out = tmp / "out"
    render_ok("-i", str(tmp / "hosts.yml"), str(tmp / "render.yml"), "-e", f"render_dir={out}")
    return hosts, out


@pytest.mark.parametrize("version", VERSIONS)
def test_rendered_config_is_the_filter_document(rendered, version):
    hosts, out = rendered
    scheduler, stacks = _load("scheduler"), _load("stacks")
    variant = scheduler.scheduler_variant(version)
    style = hosts[f"cp-{version}"]["kube_scheduler_style"]
    kubeconfig = "/etc/kubernetes/scheduler.conf" if style == "kubeadm" else "/etc/kubernetes/kube-scheduler.kubeconfig"
    extenders = stacks.stack_extenders(["gpushare"], {"gpushare": f"http://{NODE_IP}:32766"})
    expected = scheduler.scheduler_config(version, extenders, kubeconfig, None)
    path = out / f"cp-{version}" / variant["path"].lstrip("/")
    assert yaml.safe_load(path.read_text()) == expected
    assert expected["extenders"][0]["urlPrefix"] == f"http://{NODE_IP}:32766/gpushare-scheduler"


@pytest.mark.parametrize("version", VERSIONS)
def test_rendered_patch_sets_the_variant_flag_once(rendered, version):
    hosts, out = rendered
    variant = _load("scheduler").scheduler_variant(version)
    flag = f"{variant['flag']}={variant['path']}"
    other = "--config" if variant["flag"] == "--policy-config-file" else "--policy-config-file"
    host_dir = out / f"cp-{version}"
    if hosts[f"cp-{version}"]["kube_scheduler_style"] == "kubeadm":
        pod = yaml.safe_load((host_dir / "etc/kubernetes/manifests/kube-scheduler.yaml").read_text())
        command = pod["spec"]["containers"][0]["command"]
        assert command.count(flag) == 1 and not [a for a in command if a.startswith(other)]
        assert [v["hostPath"]["path"] for v in pod["spec"]["volumes"]].count(variant["path"]) == 1
    else:
        dropin = host_dir / "etc/systemd/system/kube-scheduler.service.d/90-kube-gpu-nodes-scheduler-config.conf"
        text = dropin.read_text()
        assert text.count(flag) == 1 and other not in text
        assert "--kubeconfig=/etc/kubernetes/kube-scheduler.kubeconfig" in text  # original flags kept
