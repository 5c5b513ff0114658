"""The report filters: rows with the report columns, summary, Markdown and console text."""

from __future__ import annotations

import copy
import json

import ansible_collections.kgn.gpu_nodes.plugins.filter.diagnose as d
import ansible_collections.kgn.gpu_nodes.plugins.filter.report as r
import pytest
from ansible.errors import AnsibleFilterError
from test_diagnose import CATALOG, CP_EXPECTED, NODE_EXPECTED, SCHED_OK, node


def row_for(observed, expected):
    checks = d.diagnose(d.verify_checks(observed, expected), CATALOG)
    return r.report_row(observed, expected, checks, d.verify_verdict(checks))


def test_gpu_node_row_has_every_column():
    row = row_for(node(), NODE_EXPECTED)
    assert {k for k, _ in r.COLUMNS} <= set(row)
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
    from test_diagnose import API_OK, _hami_cp, _hami_expected

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
    rows += r.report_unreached(["c-gone"])
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
        "| host | role | GPU | driver | CUDA | runtime (default) | MIG | scheduler config | labels | stack "
        "| smoke (engine; pod) | verdict |"
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


def test_report_filters_refuse_other_input():
    with pytest.raises(AnsibleFilterError, match="report_row"):
        r.report([{"no": "host"}])
    with pytest.raises(AnsibleFilterError, match="report"):
        r.report_markdown([])
    with pytest.raises(AnsibleFilterError, match="list of host names"):
        r.report_unreached("host")


def test_unreached_rows_quote_the_recorded_cause():
    hostvars = {
        "n1": {"kgn_run_failure": {"play": "Wire the container runtime to the GPU", "task": "Make nvidia the default",
                                   "unreachable": False, "msg": "/etc/docker/daemon.json is not valid JSON: line 4"}},
        "n2": {"kgn_run_failure": {"play": "Install", "task": "Gathering Facts", "unreachable": True,
                                   "msg": "Failed to connect to the host via ssh"}},
        "n3": {},
    }
    rows = {row["host"]: row for row in r.report_unreached(["n1", "n2", "n3"], hostvars)}
    first = rows["n1"]["checks"][0]
    assert first["summary"].startswith("failed in task 'Make nvidia the default'")
    assert "daemon.json is not valid JSON: line 4" in first["diagnosis"][0]["cause"]
    assert rows["n2"]["checks"][0]["summary"] == "unreachable: Failed to connect to the host via ssh"
    assert rows["n2"]["checks"][0]["diagnosis"][0]["id"] == "host_unreachable"
    assert "run_failures callback" in rows["n3"]["checks"][0]["diagnosis"][0]["cause"]
    assert all(row["verdict"] == "failed" for row in rows.values())


def test_an_adopted_driver_says_so_in_the_driver_column():
    gpu = {"present": False, "adopted": {"version": "450.248.02"}, "smi": {"found": True, "rc": 9}}
    row = row_for(node(gpu=gpu, api={"reachable": False}), dict(NODE_EXPECTED, expect_gpu=False))
    assert row["driver"] == "450.248.02 (adopted, not loaded)"
    gpu = {"present": True, "adopted": {"version": "450.248.02"}, "kernel_driver_version": "450.248.02"}
    assert row_for(node(gpu=gpu), NODE_EXPECTED)["driver"] == "450.248.02 (module, adopted)"


def test_the_smoke_column_says_what_each_smoke_saw():
    from test_diagnose import ENGINE_NO_GPU, POD_UNSCHEDULED, with_smoke

    row = row_for(with_smoke(ENGINE_NO_GPU, POD_UNSCHEDULED), NODE_EXPECTED)
    assert row["smoke"] == "engine: no GPU visible; pod: FAILED (pod not scheduled)"
    assert row_for(node(), NODE_EXPECTED)["smoke"] == "-"
    assert row_for({"scheduler": SCHED_OK, "api": {}}, CP_EXPECTED)["smoke"] == "-"
    text = r.report_text(r.report([row], {}))
    assert "cause: the pod stays Pending and no scheduler acted on it" in text
