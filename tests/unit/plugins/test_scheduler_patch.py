"""Unit tests of the kube-scheduler patch filters (filter_plugins/kgn_scheduler_patch.py)."""


import ansible_collections.kgn.gpu_nodes.plugins.module_utils.scheduler.scheduler_patch as patch
import pytest
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError

CONFIG = "/etc/kubernetes/scheduler-policy-config.yaml"
POLICY = "/etc/kubernetes/scheduler-policy-config.json"
CATALOG = {
    "gpushare": {
        "extender": {"path": "/gpushare-scheduler"},
        "service": {"name": "gpushare-schd-extender", "port": 12345, "node_port": 32766},
    },
    "nvidia_device_plugin": {"extender": None, "service": None},
}
KUBEASZ_UNIT = """[Unit]
Description=Kubernetes Scheduler

[Service]
ExecStart=/opt/kube/bin/kube-scheduler \\
  --authentication-kubeconfig=/etc/kubernetes/kube-scheduler.kubeconfig \\
  --bind-address=0.0.0.0 \\
  --leader-elect=true \\
  --v=2
Restart=always
"""


@pytest.mark.parametrize(
    ("mode", "proxy", "expected"),
    [
        ("auto", "iptables", "http://127.0.0.1:32766"),
        ("auto", "ipvs", "http://10.0.0.5:32766"),
        ("auto", "nftables", "http://10.0.0.5:32766"),
        ("auto", "unknown", "http://10.0.0.5:32766"),
        ("node_ip", "iptables", "http://10.0.0.5:32766"),
        ("loopback", "iptables", "http://127.0.0.1:32766"),
        ("cluster_ip", "ipvs", "http://10.68.0.50:12345"),
    ],
)
def test_extender_url_follows_mode_and_kube_proxy(mode, proxy, expected):
    urls = patch.scheduler_extender_urls(
        ["gpushare", "nvidia_device_plugin"], CATALOG, mode, "10.0.0.5", {"gpushare": "10.68.0.50"}, {}, proxy
    )
    assert urls == {"gpushare": expected}


@pytest.mark.parametrize("proxy", ["ipvs", "nftables"])
def test_loopback_is_refused_when_nodeports_do_not_answer_on_localhost(proxy):
    with pytest.raises(KgnError, match=f"{proxy} mode.*use 'node_ip'"):
        patch.scheduler_extender_urls(["gpushare"], CATALOG, "loopback", "", {}, {}, proxy)


def test_explicit_url_wins_and_missing_url_is_named():
    assert patch.scheduler_extender_urls(
        ["gpushare"], CATALOG, "node_ip", "10.0.0.5", {}, {"gpushare": "https://x:1"}
    ) == {"gpushare": "https://x:1"}
    with pytest.raises(KgnError, match="kube_scheduler_extender_urls has no entry for stack 'gpushare'"):
        patch.scheduler_extender_urls(["gpushare"], CATALOG, "url")


def test_exec_start_joins_continuations_and_honours_drop_in_reset():
    argv = patch.systemd_exec_start([KUBEASZ_UNIT])
    assert argv == [
        "/opt/kube/bin/kube-scheduler",
        "--authentication-kubeconfig=/etc/kubernetes/kube-scheduler.kubeconfig",
        "--bind-address=0.0.0.0",
        "--leader-elect=true",
        "--v=2",
    ]
    dropin = "[Service]\nExecStart=\nExecStart=-/usr/bin/kube-scheduler --v=4\n"
    assert patch.systemd_exec_start([KUBEASZ_UNIT, dropin]) == ["/usr/bin/kube-scheduler", "--v=4"]
    with pytest.raises(KgnError, match="2 ExecStart= lines"):
        patch.systemd_exec_start([KUBEASZ_UNIT, "[Service]\nExecStart=/bin/true\n"])


def test_exec_line_round_trips_through_the_parser():
    argv = ["/opt/kube/bin/kube-scheduler", "--v=2", "--feature-gates=A=true,B=false", "--x=50%", "--msg=a b"]
    text = "[Service]\nExecStart=" + patch.systemd_exec_line(argv) + "\n"
    assert patch.systemd_exec_start([text]) == argv


@pytest.mark.parametrize(
    "old",
    [
        ["--policy-config-file=" + POLICY],
        ["--policy-config-file", POLICY],
        ["--config=/etc/kubernetes/kube-scheduler-config.yaml"],
        [],
    ],
)
def test_scheduler_args_sets_the_flag_once_and_keeps_every_other_flag(old):
    argv = ["/opt/kube/bin/kube-scheduler", "--bind-address=0.0.0.0", *old, "--leader-elect=true", "--port=0"]
    result = patch.scheduler_args(argv, "--config", CONFIG, ["--policy-config-file", "--port"])
    assert result == [
        "/opt/kube/bin/kube-scheduler",
        "--bind-address=0.0.0.0",
        "--leader-elect=true",
        f"--config={CONFIG}",
    ]


def test_flag_value_reads_both_spellings():
    assert patch.scheduler_flag_value(["x", "--config", "/a"], "--config") == "/a"
    assert patch.scheduler_flag_value(["x", "--config=/b"], "--config") == "/b"
    assert patch.scheduler_flag_value(["x", "--v=2"], "--config") is None


def _pod():
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "kube-scheduler"},
        "spec": {
            "containers": [
                {
                    "name": "kube-scheduler",
                    "command": ["kube-scheduler", "--leader-elect=true"],
                    "volumeMounts": [
                        {"mountPath": "/etc/kubernetes/scheduler.conf", "name": "kubeconfig", "readOnly": True}
                    ],
                }
            ],
            "volumes": [
                {"hostPath": {"path": "/etc/kubernetes/scheduler.conf", "type": "FileOrCreate"}, "name": "kubeconfig"}
            ],
        },
    }


def test_static_pod_switch_from_policy_to_config_leaves_one_flag_volume_and_mount():
    at_118 = patch.scheduler_static_pod(_pod(), "--policy-config-file", POLICY, ["--config"], "a")
    at_125 = patch.scheduler_static_pod(at_118, "--config", CONFIG, ["--policy-config-file"], "b")
    container = at_125["spec"]["containers"][0]
    assert container["command"] == ["kube-scheduler", "--leader-elect=true", f"--config={CONFIG}"]
    assert [m["mountPath"] for m in container["volumeMounts"]] == ["/etc/kubernetes/scheduler.conf", CONFIG]
    assert [v["hostPath"]["path"] for v in at_125["spec"]["volumes"]] == ["/etc/kubernetes/scheduler.conf", CONFIG]
    assert at_125["metadata"]["annotations"] == {patch.CHECKSUM_ANNOTATION: "b"}
    original = _pod()
    patch.scheduler_static_pod(original, "--config", CONFIG)
    assert original == _pod()


def test_static_pod_refuses_what_is_not_a_pod():
    with pytest.raises(KgnError, match="is not a Pod"):
        patch.scheduler_static_pod({"kind": "Deployment"}, "--config", CONFIG)


def test_the_files_that_set_execstart_are_named_in_systemds_order():
    from ansible_collections.kgn.gpu_nodes.plugins.module_utils.scheduler.scheduler_patch import (
        systemd_exec_start_files,
    )

    files = [("/u", "[Service]\nExecStart=/bin/a\n"), ("/d/10.conf", "[Service]\nEnvironment=A=1\n"),
             ("/d/90.conf", "[Service]\nExecStart=\nExecStart=/bin/b \\\n  --x\n"),
             ("/d/95.conf", "[Unit]\nExecStart=/not/service\n"), ("/d/99.conf", "[Service]\nExecStart=\n")]
    assert systemd_exec_start_files(files) == ["/u", "/d/90.conf", "/d/99.conf"]
