"""The gpu_node_verify module's own reads (what only verify looks at), on files laid out like a node's."""

from __future__ import annotations

import ansible_collections.kgn.gpu_nodes.plugins.modules.gpu_node_verify as probe


def test_extender_urls_from_yaml_and_json_configs():
    yaml_text = "extenders:\n- urlPrefix: http://192.168.233.101:32766/gpushare-scheduler\n  filterVerb: filter\n"
    json_text = '{"extenders": [{"urlPrefix": "http://127.0.0.1:32766/gpushare-scheduler", "filterVerb": "filter"}]}'
    assert probe.extender_urls(yaml_text) == ["http://192.168.233.101:32766/gpushare-scheduler"]
    assert probe.extender_urls(json_text) == ["http://127.0.0.1:32766/gpushare-scheduler"]
    assert probe.extender_urls(None) == []


def test_device_plugin_sockets_leave_kubelets_own_out(tmp_path):
    for name in ("kubelet.sock", "nvidia-gpu.sock", "aliyungpushare.sock", "notes.txt"):
        (tmp_path / name).write_text("")
    found = probe.device_plugin(str(tmp_path))
    assert found == {"dir": str(tmp_path), "dir_exists": True, "sockets": ["aliyungpushare.sock", "nvidia-gpu.sock"]}
    assert probe.device_plugin(str(tmp_path / "missing"))["dir_exists"] is False


def test_a_backup_that_mentions_nvidia_is_found(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\ndefault_runtime_name = "runc"\n')
    assert probe.backups_mention_nvidia(str(config)) is False
    (tmp_path / "config.toml.20261124T080000-12~").write_text('default_runtime_name = "nvidia"\n')
    assert probe.backups_mention_nvidia(str(config)) is True


def test_an_unanswered_url_says_why():
    answer = probe.http("http://127.0.0.1:9/healthz", timeout=2)
    assert answer["status"] is None and answer["error"]


def test_the_action_reads_this_host_and_returns_its_judged_row():
    """Through Ansible (the action plugin runs the module here, then judges on the controller)."""
    from kubectl_fake import run_module

    states = {"container_runtime": {"plan": {"engine": "containerd", "files": []}, "changed": False,
                                    "live": {"answered": True, "active": True, "default_runtime": "runc",
                                             "runtimes": ["nvidia", "runc"]}}}
    answer = {"results": [{"item": {"host": "cp1"}, "reachable": True, "resources": {
        "nodes": {"items": [{"metadata": {"name": "gpu1", "labels": {"gpushare": "true"}}}]}}}]}
    args = {"settings": {"host": "gpu1", "kinds": ["gpu_node"], "stacks": ["gpushare"], "expect_gpu": False,
                         "labels_require_gpu": False},
            "states": states, "api": answer, "api_host": "cp1", "device_plugin_dir": "/nonexistent"}
    result = run_module("gpu_node_verify", args, check=True)
    row = result["row"]
    checks = {c["id"]: c for c in row["checks"]}
    assert row["host"] == "gpu1" and row["verdict"] == "failed"
    assert checks["runtime_default"]["status"] == "failed"
    assert [d["id"] for d in checks["runtime_default"]["diagnosis"]] == ["containerd_default_not_nvidia"]
    assert checks["node_labels"]["status"] == "ok" and row["labels"] == "gpushare=true"
    assert result["observed"]["device_plugin"]["dir_exists"] is False
    # without settings it only reads (what gpu_node_probe returned)
    plain = run_module("gpu_node_verify", {"gpu_node": True, "device_plugin_dir": "/nonexistent"})
    assert "row" not in plain and plain["observed"]["gpu_node"] is True
