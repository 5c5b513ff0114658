"""The CDI checks on the real H100 node's specs (tests/unit/fixtures/h100-cdi, written by nvidia-ctk 1.20.0)."""

from __future__ import annotations

import json
import pathlib

import pytest
import yaml
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.runtime import cdi

FIXTURES = pathlib.Path(__file__).parents[1] / "fixtures" / "h100-cdi"
UUID = "GPU-00000000-0000-0000-0000-000000000000"
DRIVER = "580.159.04"


def default_spec_text():
    # the YAML nvidia-ctk writes by default, as the JSON it writes with --format=json (same document)
    return json.dumps(yaml.safe_load((FIXTURES / "nvidia-ctk-cdi-generate-default.yaml").read_text()))


def uuid_spec_text():
    return (FIXTURES / "nvidia-ctk-cdi-generate-uuid.json").read_text()


def gpus_from_capture():
    # index and UUID as nvidia-smi shows them on that node (its -q -x output)
    xml = (FIXTURES / "nvidia-smi-q-x.xml").read_text()
    assert f"<uuid>{UUID}</uuid>" in xml and "<minor_number>0</minor_number>" in xml
    return [{"index": 0, "uuid": UUID}]


def state(text, **over):
    try:
        spec = cdi.parse_spec(text)
    except KgnError:
        spec = {"devices": []}
    base = {"spec_path": "/var/run/cdi/nvidia.json", "spec_text": text, "spec_mtime": 2000.0,
            "driver": {"version": DRIVER, "installed_at": 1000.0, "answers": True}, "gpus": gpus_from_capture(),
            "paths": {p: True for p in cdi.host_paths(spec)},
            "engine": {"name": "containerd", "enabled": True, "spec_dirs": ["/etc/cdi", "/var/run/cdi"]},
            "spec_dir": "/var/run/cdi"}
    return {**base, **over}


def rows_by_id(rows):
    return {r["id"]: r for r in rows}


def test_the_h100_spec_lists_its_gpu_by_index_uuid_and_all():
    spec = cdi.parse_spec(default_spec_text())
    assert cdi.device_names(spec) == ["nvidia.com/gpu=0", f"nvidia.com/gpu={UUID}", "nvidia.com/gpu=all"]
    assert cdi.driver_versions(spec) == [DRIVER]
    paths = cdi.host_paths(spec)
    assert "/dev/nvidia0" in paths and "/dev/nvidiactl" in paths and "/usr/bin/nvidia-cdi-hook" in paths
    assert f"/usr/local/nvidia/lib64/libcuda.so.{DRIVER}" in paths
    assert f"/usr/local/nvidia/firmware/nvidia/{DRIVER}/gsp_ga10x.bin" in paths
    uuid_spec = cdi.parse_spec(uuid_spec_text())
    assert cdi.device_names(uuid_spec) == [f"nvidia.com/gpu={UUID}", "nvidia.com/gpu=all"]
    assert cdi.host_paths(uuid_spec) == paths  # the same host files, other device names


@pytest.mark.parametrize("text", [default_spec_text(), uuid_spec_text()])
def test_a_sound_spec_passes_every_check(text):
    rows = cdi.cdi_checks(state(text))
    assert [r["id"] for r in rows] == list(cdi.IDS)
    assert {r["id"]: r["status"] for r in rows} == dict.fromkeys(cdi.IDS, "ok")


def test_no_spec():
    rows = rows_by_id(cdi.cdi_checks(state(None)))
    assert rows["cdi_spec"]["status"] == "failed" and rows["cdi_spec"]["evidence"]["missing"] is True
    assert rows["cdi_spec"]["summary"].startswith("no spec: /var/run/cdi/nvidia.json does not exist")
    assert set(rows) == {"cdi_spec", "cdi_engine"}


def test_a_spec_that_is_not_json_is_named():
    rows = rows_by_id(cdi.cdi_checks(state("cdiVersion: 0.5.0\n")))
    assert rows["cdi_spec"]["status"] == "failed" and rows["cdi_spec"]["evidence"]["missing"] is False


def test_stale_spec_after_a_driver_upgrade_names_both_versions():
    text = default_spec_text()
    rows = rows_by_id(cdi.cdi_checks(state(text, driver={"version": "580.95.05", "installed_at": 1000.0,
                                                          "answers": True})))
    assert rows["cdi_fresh"]["status"] == "failed" and rows["cdi_fresh"]["evidence"]["stale"] is True
    assert "written for driver 580.159.04, the node runs 580.95.05" in rows["cdi_fresh"]["summary"]


def test_stale_spec_older_than_the_driver_install():
    rows = rows_by_id(cdi.cdi_checks(state(default_spec_text(), spec_mtime=500.0)))
    assert rows["cdi_fresh"]["status"] == "failed" and "older than the driver" in rows["cdi_fresh"]["summary"]


def test_spec_names_a_missing_file():
    text = default_spec_text()
    spec = cdi.parse_spec(text)
    paths = {p: p != f"/usr/local/nvidia/lib64/libcuda.so.{DRIVER}" for p in cdi.host_paths(spec)}
    rows = rows_by_id(cdi.cdi_checks(state(text, paths=paths)))
    assert rows["cdi_paths"]["status"] == "failed"
    assert rows["cdi_paths"]["evidence"]["missing"] == [f"/usr/local/nvidia/lib64/libcuda.so.{DRIVER}"]
    # a node whose driver does not answer (the lab, a node before its reboot) is warned, not failed
    rows = rows_by_id(cdi.cdi_checks(state(text, paths=paths, driver={"version": DRIVER, "answers": False})))
    assert rows["cdi_paths"]["status"] == "warn"


def test_a_gpu_missing_from_the_spec():
    gpus = [*gpus_from_capture(), {"index": 1, "uuid": "GPU-11111111-1111-1111-1111-111111111111"}]
    rows = rows_by_id(cdi.cdi_checks(state(uuid_spec_text(), gpus=gpus)))
    assert rows["cdi_devices"]["status"] == "failed"
    assert rows["cdi_devices"]["evidence"]["missing"] == ["GPU 1 (GPU-11111111-1111-1111-1111-111111111111)"]
    rows = rows_by_id(cdi.cdi_checks(state(uuid_spec_text(), gpus=None)))
    assert rows["cdi_devices"]["status"] == "skipped"


@pytest.mark.parametrize(
    ("engine", "status", "words"),
    [
        ({"name": "containerd", "enabled": False}, "failed", "containerd has CDI off"),
        ({"name": "crio", "enabled": True, "spec_dirs": ["/etc/cdi"]}, "failed", "does not scan /var/run/cdi"),
        ({"name": "docker", "enabled": None}, "skipped", "did not say"),
        ({"name": "docker", "enabled": True, "spec_dirs": []}, "ok", "default folders"),
    ],
)
def test_engine_has_cdi_off(engine, status, words):
    row = rows_by_id(cdi.cdi_checks(state(uuid_spec_text(), engine=engine)))["cdi_engine"]
    assert row["status"] == status and words in row["summary"]


def test_problems_lists_only_failed_rows():
    rows = cdi.cdi_checks(state(None, engine={"name": "containerd", "enabled": False}))
    assert len(cdi.problems(rows)) == 2


def test_bad_state_is_refused():
    with pytest.raises(KgnError, match="must be a mapping"):
        cdi.cdi_checks([])


def test_the_json_copy_of_the_yaml_capture_is_the_same_document():
    yaml_spec = yaml.safe_load((FIXTURES / "nvidia-ctk-cdi-generate-default.yaml").read_text())
    assert json.loads((FIXTURES / "nvidia-ctk-cdi-generate-default.json").read_text()) == yaml_spec
