"""The report (plugins/module_utils/report.py): rows with the report columns, summary, problems, changes, Markdown,
console text, and where a run writes it."""

from __future__ import annotations

import copy
import json

import pytest
from ansible_collections.kgn.gpu_nodes.plugins.module_utils import report as r
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.verify import checks as c
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.verify import verify
from test_checks import CP_EXPECTED, NODE_EXPECTED, SCHED_OK, node


def row_for(observed, expected):
    checks = c.diagnose(c.run_checks(observed, expected))
    return r.report_row(observed, expected, checks, c.verdict(checks))


def stopped(host, failure, **settings):
    """The row of a host that stopped earlier in the run: judged from its recorded states, saying why."""
    return verify.verify_host(dict({"host": host, "kinds": ["gpu_node"]}, **settings), settings.pop("states", {}),
                              None, None, failure)


def test_gpu_node_row_has_every_column():
    row = row_for(node(), NODE_EXPECTED)
    assert {column.key for column in r.COLUMNS} <= set(row)
    assert row["gpu"] == "Tesla T4 x 1"
    assert row["driver"] == "535.309.01"
    assert row["cuda"] == "12.2"
    assert row["runtime"] == "docker 20.10.24 (nvidia)"
    assert row["labels"] == "gpushare=true"
    assert row["stack"] == "gpushare"
    assert row["scheduler"] == "-"
    assert row["verdict"] == "ok"


def test_control_plane_row_shows_the_scheduler_variant_and_flag():
    row = row_for({"scheduler": SCHED_OK, "api": {"reachable": False}}, CP_EXPECTED)
    assert row["role"] == "control plane"
    assert row["scheduler"] == "v1beta3 (--config)"
    assert row["gpu"] == "-"


def test_control_plane_without_extender_stacks_says_the_scheduler_is_unchanged():
    expected = copy.deepcopy(CP_EXPECTED)
    expected["stacks"] = ["nvidia_device_plugin"]
    expected["scheduler"]["extender_paths"] = []
    row = row_for({"scheduler": SCHED_OK, "api": {"reachable": False}}, expected)
    assert row["scheduler"] == "unchanged (no extender needed)"


def test_hami_rows_show_its_own_scheduler_and_whether_the_gpus_are_registered():
    from test_checks import API_OK, _hami_cp, _hami_expected

    checks, _ = _hami_cp(ready=0)
    row = r.report_row({"scheduler": SCHED_OK}, _hami_expected(["control_plane"]), list(checks.values()), "failed")
    assert row["scheduler"] == "unchanged (no extender needed); own scheduler: kube-system/hami-scheduler 0/1 ready"
    api = dict(API_OK, node={"labels": {"gpu": "on"}, "allocatable": {"nvidia.com/gpu": "10"},
                             "annotations": {"hami.io/node-nvidia-register": "GPU-1,10,15360,100,NVIDIA-Tesla T4"}})
    row = row_for(node(api=api, sockets=("nvidia-gpu.sock",)), _hami_expected(["gpu_node"]))
    assert row["stack"] == "hami (GPUs registered)" and row["verdict"] == "ok"


def test_gpu_less_row_says_none_and_installed_driver():
    gpu = {"present": False, "package_version": "535.309.01-1~deb12u1", "smi": {"found": True, "rc": 9}}
    row = row_for(node(gpu=gpu, api={"reachable": False}), dict(NODE_EXPECTED, expect_gpu=False))
    assert row["gpu"] == "none"
    assert row["driver"] == "535.309.01-1~deb12u1 (installed, not loaded)"
    assert row["labels"] == "skipped: no API"
    assert row["verdict"] == "degraded"


def test_report_counts_verdicts_and_lists_problems_with_causes():
    runtime = {
        "engine": "docker",
        "docker": {"answered": True, "default_runtime": "runc", "runtimes": ["nvidia", "runc"]},
    }
    rows = [
        row_for(node(), dict(NODE_EXPECTED, host="b-ok")),
        row_for(node(runtime=runtime), dict(NODE_EXPECTED, host="a-bad")),
    ]
    rows.append(stopped("c-gone", {}))
    report = r.report(rows, {"generated": "20250101T000000Z"})
    assert [row["host"] for row in report["rows"]] == ["a-bad", "b-ok", "c-gone"]
    assert report["summary"] == {"ok": 1, "degraded": 0, "pending": 0, "failed": 2}
    by_check = {(p["host"], p["check"]): p for p in report["problems"]}
    assert by_check[("a-bad", "runtime_default")]["diagnosis"][0]["id"] == "docker_default_not_nvidia"
    assert by_check[("c-gone", "host_reached")]["status"] == "failed"
    json.dumps(report)  # report.json must be plain data


def test_markdown_and_text_carry_the_table_and_the_fix():
    runtime = {
        "engine": "docker",
        "docker": {"answered": True, "default_runtime": "runc", "runtimes": ["nvidia", "runc"]},
    }
    report = r.report([row_for(node(runtime=runtime), NODE_EXPECTED)], {"generated": "x"})
    markdown = r.report_markdown(report)
    assert (
        "| host | role | GPU | driver | CUDA | runtime (default) | MIG | scheduler config | labels | DRA | stack "
        "| smoke (engine; pod) | isolation | verdict |"
        in markdown
    )
    assert "| gpu1 | GPU node | Tesla T4 x 1 | 535.309.01 | 12.2 | docker (runc) |" in markdown
    assert '**Fix:** set "default-runtime": "nvidia"' in markdown
    text = r.report_text(report)
    lines = text.splitlines()
    assert lines[0].split()[:3] == ["host", "role", "GPU"]
    assert "0 ok, 0 degraded, 1 failed" in text
    assert (
        "gpu1: FAILED container runtime's default runtime is nvidia: docker default runtime is runc, not nvidia" in text
    )


def test_report_refuses_other_input():
    with pytest.raises(KgnError, match="report rows"):
        r.report([{"no": "host"}])
    with pytest.raises(KgnError, match="report"):
        r.report_markdown([])


def test_rows_of_stopped_hosts_quote_the_recorded_cause():
    rows = {
        "n1": stopped("n1", {"play": "Wire the container runtime to the GPU", "task": "Make nvidia the default",
                             "unreachable": False, "msg": "/etc/docker/daemon.json is not valid JSON: line 4"}),
        "n2": stopped("n2", {"play": "Install", "task": "Gathering Facts", "unreachable": True,
                             "msg": "Failed to connect to the host via ssh"}),
        "n3": stopped("n3", {}),
    }
    first = rows["n1"]["checks"][0]
    assert first["id"] == "host_reached"
    assert first["summary"].startswith("failed in task 'Make nvidia the default'")
    assert "daemon.json is not valid JSON: line 4" in first["diagnosis"][0]["cause"]
    assert rows["n2"]["checks"][0]["summary"] == "unreachable: Failed to connect to the host via ssh"
    assert rows["n2"]["checks"][0]["diagnosis"][0]["id"] == "host_unreachable"
    assert "run_failures callback" in rows["n3"]["checks"][0]["diagnosis"][0]["cause"]
    assert all(row["verdict"] == "failed" for row in rows.values())
    assert r.failed_steps(list(rows.values()))[0].startswith("n1: failed in task 'Make nvidia the default'")


def test_a_host_that_hung_is_named_as_hung_with_the_timeout():
    """A frozen host fails its task at kgn_task_timeout; its row says it hung, not that the task said no."""
    row = stopped("n4", {"play": "Wire the container runtime to the GPU", "task": "Install the toolkit",
                         "unreachable": False, "msg": "Task failed: Timed out after 60 second(s).",
                         "timed_out": True, "timeout": 60})
    first = row["checks"][0]
    assert first["summary"] == ("hung: task 'Install the toolkit' of play 'Wire the container runtime to the GPU' "
                                "did not finish within 60 s and was stopped")
    [why] = first["diagnosis"]
    assert why["id"] == "host_timed_out" and "kgn_task_timeout (60 s)" in why["cause"]
    assert row["verdict"] == "failed"


def test_a_host_that_stopped_keeps_what_it_gathered():
    """Its driver play recorded the driver before the runtime play failed: the row shows it, not "?"."""
    driver = {"plan": {"version_package": "nvidia-driver"},
              "live": {"packages": {"nvidia-driver": "535.261.03-1~deb12u1"}, "gpu": {"gpu_present": False},
                       "nvidia_smi": {"path": "/usr/bin/nvidia-smi", "answered": False, "reason": "no GPU"}}}
    row = stopped("n1", {"play": "Wire the container runtime to the GPU", "task": "t", "unreachable": False,
                         "msg": "boom"}, states={"nvidia_driver": driver}, driver_version="535.261.03",
                  stacks=["nvidia_device_plugin"])
    assert row["driver"] == "535.261.03-1~deb12u1 (installed, not loaded)"
    assert row["stack"] == "nvidia_device_plugin" and row["runtime"] == "not recorded"
    found = {check["id"]: check for check in row["checks"]}
    assert found["driver_package"]["status"] == "ok"
    assert found["device_plugin_socket"]["summary"].startswith("skipped: not read")
    assert row["verdict"] == "failed"


def test_the_labels_column_shows_every_label_the_project_manages():
    api = {"reachable": True, "node_name": "gpu1", "node": {
        "labels": {"gpushare": "true", "nvidia.com/gpu.present": "true", "accelerator": "nvidia-tesla-t4",
                   "kubernetes.io/hostname": "gpu1"},
        "annotations": {"kube-gpu-nodes.io/managed-labels": "accelerator,gpushare,nvidia.com/gpu.present"},
        "allocatable": {"aliyun.com/gpu-mem": "14", "aliyun.com/gpu-count": "1"}}}
    row = row_for(node(api=api), NODE_EXPECTED)
    assert row["labels"] == "accelerator=nvidia-tesla-t4, gpushare=true, nvidia.com/gpu.present=true"
    api["node"]["labels"].pop("gpushare")
    assert row_for(node(api=api), NODE_EXPECTED)["labels"] == (
        "accelerator=nvidia-tesla-t4, nvidia.com/gpu.present=true; missing gpushare")


def test_changes_and_repairs_are_listed_per_host():
    states = {"nvidia_container_toolkit": {"plan": {}, "changed": True, "check_mode": False,
                                           "repaired": ["holds re-applied: nvidia-container-toolkit"], "changes": []},
              "node_labels": {"plan": {}, "changed": True, "check_mode": False, "repaired": [],
                              "changes": ["labels of node n1: set gpushare=true"]},
              "nvidia_driver": {"plan": {}, "changed": False, "check_mode": False, "repaired": []}}
    row = stopped("n1", {"play": "p", "task": "t", "msg": "m"}, states=states)
    report = r.report([row])
    assert report["changes"] == [{"host": "n1", "concerns": row["changes"]}]
    lines = r.change_lines(report["changes"][0])
    assert lines == ["nvidia_container_toolkit: repaired: holds re-applied: nvidia-container-toolkit",
                     "node_labels: labels of node n1: set gpushare=true"]
    markdown = r.report_markdown(report)
    assert "## Changes" in markdown and "  - node_labels: labels of node n1" in markdown
    assert "n1: nvidia_container_toolkit: repaired: holds re-applied" in r.report_text(report)


def test_a_check_mode_report_goes_to_its_own_folder_and_leaves_latest(tmp_path):
    report = r.report([row_for(node(), NODE_EXPECTED)], {"generated": "x"})
    real = r.write(report, str(tmp_path), "20260101T000000Z", False)
    check = r.write(report, str(tmp_path), "20260101T000100Z", True)
    assert real.endswith("20260101T000000Z") and check.endswith("20260101T000100Z-check")
    assert (tmp_path / "latest").resolve() == tmp_path / "20260101T000000Z"
    assert (tmp_path / "latest-check").resolve() == tmp_path / "20260101T000100Z-check"
    assert json.loads((tmp_path / "latest" / "report.json").read_text())["rows"][0]["host"] == "gpu1"
    assert (tmp_path / "latest-check" / "report.md").read_text().startswith("# GPU node report")


def test_a_new_column_is_one_registration():
    r.column("test_dra", "DRA", gpu_node_only=True)(lambda observed, expected, checks: "2 slices")
    try:
        row = row_for(node(), NODE_EXPECTED)
        assert row["test_dra"] == "2 slices" and [col.key for col in r.COLUMNS][-2:] == ["test_dra", "verdict"]
        assert row_for({"scheduler": SCHED_OK, "api": {"reachable": False}}, CP_EXPECTED)["test_dra"] == "-"
    finally:
        r.COLUMNS[:] = [col for col in r.COLUMNS if col.key != "test_dra"]


def test_an_adopted_driver_says_so_in_the_driver_column():
    gpu = {"present": False, "adopted": {"version": "450.248.02"}, "smi": {"found": True, "rc": 9}}
    row = row_for(node(gpu=gpu, api={"reachable": False}), dict(NODE_EXPECTED, expect_gpu=False))
    assert row["driver"] == "450.248.02 (adopted, not loaded)"
    gpu = {"present": True, "adopted": {"version": "450.248.02"}, "kernel_driver_version": "450.248.02"}
    assert row_for(node(gpu=gpu), NODE_EXPECTED)["driver"] == "450.248.02 (module, adopted)"


def test_the_stacks_are_the_change_of_the_control_plane_that_applied_them():
    stacks = {"plan": {}, "changed": True, "check_mode": False, "repaired": [], "changes": ["applied x.yml: created"]}
    node = stopped("n1", {}, states={"stacks": stacks})
    plane = verify.verify_host({"host": "cp1", "kinds": ["control_plane"]}, {"stacks": stacks})
    assert node["changes"] == [] and [c["concern"] for c in plane["changes"]] == ["stacks"]


def test_the_runtime_cell_says_the_runtime_mode():
    from ansible_collections.kgn.gpu_nodes.plugins.module_utils.report import _runtime_cell

    observed = {"runtime": {"engine": "containerd", "containerd": {
        "answered": True, "version": "2.1.9", "default_runtime": "nvidia", "runtime_mode": "cdi"}}}
    assert _runtime_cell(observed, {}, []) == "containerd 2.1.9 (nvidia, cdi)"
