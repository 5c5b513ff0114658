"""Verify and the report know MIG: the layout per GPU recorded by the nvidia_mig module, judged against the
inventory's nvidia_mig_layout (the check fails when the live layout differs), and the report's MIG column."""

from __future__ import annotations

import copy

from ansible_collections.kgn.gpu_nodes.plugins.module_utils import report as r
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.mig import mig
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.verify import checks as c
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.verify import verify
from test_checks import NODE_EXPECTED, node

GPUS = [{"index": i, "pci_bus_id": f"00000000:{i:02d}:00.0", "product_name": "NVIDIA A100-PCIE-40GB",
         "memory_total_mib": 40960, "mig_current": "Disabled", "mig_pending": "Disabled", "mig_devices": [],
         "processes": []} for i in (0, 1)]
LAYOUT = [{"devices": [0], "profiles": ["3g.20gb", "3g.20gb"]}, {"devices": "all", "profiles": []}]


def _state(live):
    return {"plan": mig.mig_plan(LAYOUT, "mixed", True, GPUS), "live": {"gpus": live}}


APPLIED = [{"index": 0, "mig": True, "pending": True, "profiles": ["3g.20gb", "3g.20gb"], "complete": True},
           {"index": 1, "mig": False, "pending": False, "profiles": [], "complete": True}]


def _judge(state, layout=LAYOUT):
    observed = node()
    probe = {"gpu_node": True}
    observed["mig"] = verify.verify_observed(probe, {"nvidia_mig": state} if state else {})["mig"]
    expected = dict(copy.deepcopy(NODE_EXPECTED), mig_layout=layout)
    checks = c.diagnose(c.run_checks(observed, expected))
    row = r.report_row(observed, expected, checks, c.verdict(checks))
    return {c["id"]: c for c in checks}, row


def test_live_layout_as_asked_is_ok_and_shown_per_gpu():
    checks, row = _judge(_state(APPLIED))
    assert checks["mig_layout"]["status"] == "ok"
    assert checks["mig_layout"]["summary"] == "GPU 0: MIG 3g.20gb, 3g.20gb; GPU 1: MIG off (whole GPU)"
    assert row["mig"] == "GPU 0: MIG 3g.20gb, 3g.20gb; GPU 1: MIG off (whole GPU)"
    assert row["verdict"] == "ok"


def test_live_layout_that_differs_fails_with_the_difference():
    drifted = copy.deepcopy(APPLIED)
    drifted[0]["profiles"] = ["7g.40gb"]
    checks, row = _judge(_state(drifted))
    check = checks["mig_layout"]
    assert check["status"] == "failed"
    assert check["summary"] == "GPU 0: instances are 7g.40gb, wanted 3g.20gb, 3g.20gb"
    assert [item["id"] for item in check["diagnosis"]] == ["mig_layout_drift"]
    assert row["verdict"] == "failed" and row["mig"].startswith("GPU 0: MIG 7g.40gb")


def test_pending_mode_is_shown_and_fails():
    pending = copy.deepcopy(APPLIED)
    pending[1]["pending"] = True
    checks, row = _judge(_state(pending))
    assert checks["mig_layout"]["status"] == "ok"  # the current mode is what counts; the report says it is pending
    assert row["mig"].endswith("GPU 1: MIG off (whole GPU) (mode change pending)")


def test_inventory_changed_since_the_last_run():
    checks, _ = _judge(_state(APPLIED), layout="all-3g.20gb")
    assert checks["mig_layout"]["status"] == "failed"
    assert "last applied for" in checks["mig_layout"]["summary"]


def test_no_recorded_state():
    checks, _ = _judge({})
    assert checks["mig_layout"]["status"] == "failed"
    assert [item["id"] for item in checks["mig_layout"]["diagnosis"]] == ["mig_not_applied"]


def test_not_managed_adds_no_check_and_a_dash():
    checks, row = _judge({}, layout="")
    assert "mig_layout" not in checks and row["mig"] == "-"
