"""Tests of the gpu_facts module: parsers on real nvidia-smi samples, and the module end to end.

The samples in fixtures/ are real `nvidia-smi -q -x` outputs (see fixtures/README.md for sources).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
import ansible_collections.kgn.gpu_nodes.plugins.module_utils.gpu as kg  # noqa: E402

# What nvidia-smi prints in a node without the kernel module (seen in the lab containers).
NO_DRIVER = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running.\n"
)


def _parse(name: str) -> dict:
    return kg.parse_nvidia_smi_xml((FIXTURES / name).read_text())


def test_t4_sample():
    facts = _parse("tesla-t4.xml")
    assert facts["gpu_present"] is True and facts["driver_loaded"] is True
    assert (facts["driver_version"], facts["cuda_version"], facts["gpu_count"]) == ("515.105.01", "11.7", 1)
    gpu = facts["gpus"][0]
    assert gpu["product_name"] == "Tesla T4"
    assert gpu["uuid"] == "GPU-d37e67a5-91dd-3774-a5cb-99096249601a"
    assert gpu["memory_total_mib"] == 15360
    assert gpu["pci_bus_id"] == "00000000:00:1E.0"
    assert (gpu["mig_mode_current"], gpu["mig_mode_pending"], gpu["mig_device_count"]) == ("N/A", "N/A", 0)
    assert gpu["persistence_mode"] == "Disabled"
    assert gpu["compute_capability"] is None  # this driver does not print <compute_cap>
    assert gpu["product_architecture"] == "Turing"


def test_v100s_sample_without_architecture_element():
    facts = _parse("tesla-v100s-pcie-32gb.xml")
    assert (facts["driver_version"], facts["cuda_version"]) == ("460.73.01", "11.2")
    assert facts["attached_gpus"] == 8 and facts["gpu_count"] == 1  # the excerpt keeps the first GPU
    gpu = facts["gpus"][0]
    assert gpu["product_name"] == "Tesla V100S-PCIE-32GB"
    assert gpu["memory_total_mib"] == 32510
    assert gpu["product_architecture"] is None
    assert gpu["uuid"] == "GPU-76098dc1-d3bc-9a1b-7ea6-f7b48837829e"


def test_a100_sample_with_mig_enabled():
    facts = _parse("a100-sxm4-80gb-mig.xml")
    assert (facts["driver_version"], facts["cuda_version"]) == ("535.54.03", "12.2")
    gpu = facts["gpus"][0]
    assert gpu["product_name"] == "NVIDIA A100-SXM4-80GB"
    assert (gpu["mig_mode_current"], gpu["mig_mode_pending"]) == ("Enabled", "Enabled")
    assert gpu["mig_device_count"] == 4
    assert gpu["memory_total_mib"] == 81920  # the GPU's memory, not a MIG slice's 19968


@pytest.mark.parametrize("text", ["", "NVIDIA-SMI has failed", "<html/>"])
def test_parser_refuses_text_that_is_not_nvidia_smi_xml(text):
    with pytest.raises(kg.GpuParseError):
        kg.parse_nvidia_smi_xml(text)


LSPCI = """\
00:00.0 Host bridge [0600]: Intel Corporation 440FX - 82441FX PMC [Natoma] [8086:1237] (rev 02)
00:1e.0 3D controller [0302]: NVIDIA Corporation TU104GL [Tesla T4] [10de:1eb8] (rev a1)
3b:00.0 3D controller [0302]: NVIDIA Corporation GV100GL [Tesla V100S PCIe 32GB] [10de:1df6] (rev a1)
3b:00.1 Audio device [0403]: NVIDIA Corporation Device [10de:10f8] (rev a1)
65:00.0 VGA compatible controller [0300]: NVIDIA Corporation GA102 [GeForce RTX 3090] [10de:2204] (rev a1)
"""


def test_lspci_finds_nvidia_gpus_only():
    gpus = kg.parse_lspci(LSPCI)
    assert [g["product_name"] for g in gpus] == ["Tesla T4", "Tesla V100S PCIe 32GB", "GeForce RTX 3090"]
    assert gpus[0]["pci_device_id"] == "1EB810DE"  # same form as nvidia-smi's <pci_device_id>
    assert gpus[0]["chip"] == "TU104GL"


def test_no_driver_result_keeps_lspci_gpus_and_the_reason():
    result = kg.no_driver_result("nvidia-smi: failed", kg.parse_lspci(LSPCI))
    assert (result["gpu_present"], result["driver_loaded"], result["source"]) == (True, False, "lspci")
    assert result["gpu_count"] == 3 and result["reason"] == "nvidia-smi: failed"


# --- the module end to end, with stand-in nvidia-smi / lspci scripts -------------------------------
def _stand_in(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def _run_module(args: str, check: bool = False) -> dict:
    env = dict(
        os.environ,
        ANSIBLE_COLLECTIONS_PATH=os.environ.get("ANSIBLE_COLLECTIONS_PATH") or str(ROOT / "collections"),
        ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
        ANSIBLE_STDOUT_CALLBACK="json",
        ANSIBLE_PYTHON_INTERPRETER=sys.executable,
    )
    ansible = str(Path(sys.executable).with_name("ansible"))  # the venv's, whatever PATH says
    cmd = [ansible, "localhost", "-c", "local", "-i", "localhost,", "-m", "kgn.gpu_nodes.gpu_facts", "-a", args]
    if check:
        cmd.append("--check")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]


def test_module_reports_the_gpus_nvidia_smi_prints(tmp_path):
    smi = _stand_in(tmp_path, "nvidia-smi", f"cat {FIXTURES / 'a100-sxm4-80gb-mig.xml'}\n")
    result = _run_module(f"nvidia_smi_path={smi} use_lspci=false", check=True)
    assert result["changed"] is False
    assert result["gpus"][0]["mig_mode_current"] == "Enabled"
    assert result["driver_loaded"] is True and result["reason"] is None


def test_module_answers_without_traceback_when_the_driver_is_not_loaded(tmp_path):
    smi = _stand_in(tmp_path, "nvidia-smi", f"printf '%s' \"{NO_DRIVER}\"\nexit 9\n")
    lspci = _stand_in(
        tmp_path,
        "lspci",
        "echo '00:1e.0 3D controller [0302]: NVIDIA Corporation TU104GL [Tesla T4] [10de:1eb8] (rev a1)'\n",
    )
    result = _run_module(f"nvidia_smi_path={smi} lspci_path={lspci}")
    assert result.get("failed", False) is False
    assert (result["gpu_present"], result["driver_loaded"], result["source"]) == (True, False, "lspci")
    assert result["reason"].startswith("nvidia-smi: NVIDIA-SMI has failed because it couldn't communicate")
    assert result["gpus"][0]["product_name"] == "Tesla T4"


def test_module_answers_when_neither_tool_exists():
    result = _run_module("nvidia_smi_path=/nonexistent/nvidia-smi lspci_path=/nonexistent/lspci")
    assert (result["gpu_present"], result["driver_loaded"], result["source"]) == (False, False, "none")
    assert "not found" in result["reason"] and "lspci: not found" in result["reason"]
    assert result["gpus"] == []


# --- a real H100 on driver 580 (fixtures/nvidia-h100-80gb-hbm3-580/README.md) -------------------------------
H100 = FIXTURES / "nvidia-h100-80gb-hbm3-580"
CAPTURED_QUERY = ("name", "driver_version", "pci.bus_id", "memory.total [MiB]", "mig.mode.current",
                  "mig.mode.pending", "compute_cap", "persistence_mode")


def test_h100_580_xml_parses_without_a_compute_capability_element():
    facts = kg.parse_nvidia_smi_xml((H100 / "nvidia-smi-q-x.xml").read_text())
    assert (facts["driver_version"], facts["cuda_version"], facts["gpu_count"]) == ("580.159.04", "13.0", 1)
    gpu = facts["gpus"][0]
    assert (gpu["product_name"], gpu["product_architecture"]) == ("NVIDIA H100 80GB HBM3", "Hopper")
    assert gpu["memory_total_mib"] == 81559 and gpu["pci_bus_id"] == "00000000:00:06.0"
    assert (gpu["mig_mode_current"], gpu["mig_devices"], gpu["processes"]) == ("Disabled", [], [])
    # driver 580 prints no <compute_cap>: the XML alone leaves it open ...
    assert gpu["compute_capability"] is None


def test_h100_580_compute_capability_comes_from_the_csv_query():
    facts = kg.parse_nvidia_smi_xml((H100 / "nvidia-smi-q-x.xml").read_text())
    rows = kg.parse_query_csv((H100 / "query.csv").read_text(), CAPTURED_QUERY)
    assert rows == [{"name": "NVIDIA H100 80GB HBM3", "driver_version": "580.159.04", "pci.bus_id": "00000000:00:06.0",
                     "memory.total [MiB]": "81559 MiB", "mig.mode.current": "Disabled", "mig.mode.pending": "Disabled",
                     "compute_cap": "9.0", "persistence_mode": "Enabled"}]
    gpu = kg.add_compute_capability(facts, rows)["gpus"][0]
    assert (gpu["compute_capability"], gpu["compute_capability_source"]) == (
        "9.0", "nvidia-smi --query-gpu=compute_cap")


def test_h100_proc_version_says_open_kernel_module():
    assert kg.parse_proc_version((H100 / "proc-version.txt").read_text()) == {"version": "580.159.04",
                                                                              "flavour": "open"}
    module = kg.kernel_module((H100 / "proc-version.txt").read_text())
    assert module == {"version": "580.159.04", "flavour": "open", "source": "/proc/driver/nvidia/version"}


@pytest.mark.parametrize(("text", "flavour", "signed"), [
    # modinfo of the open module (open-gpu-kernel-modules: MODULE_LICENSE("Dual MIT/GPL")) signed by DKMS
    ("filename:       /lib/modules/6.12.48+deb13-amd64/updates/dkms/nvidia-current.ko.xz\nversion:        "
     "550.163.01\nlicense:        Dual MIT/GPL\nsigner:         DKMS module signing key\n", "open", True),
    # the proprietary module, unsigned
    ("filename:       /lib/modules/6.1.0-18-amd64/updates/dkms/nvidia-current.ko\nversion:        535.261.03\n"
     "license:        NVIDIA\n", "proprietary", False),
])
def test_modinfo_license_names_the_flavour(text, flavour, signed):
    info = kg.parse_modinfo(text)
    assert (info["flavour"], info["signed"]) == (flavour, signed)
    assert kg.kernel_module("", text)["source"] == "modinfo nvidia"


def test_a_gpu_nvidia_smi_cannot_answer_for_takes_the_product_tables_capability():
    facts = kg.no_driver_result("nvidia-smi: not found", [{"index": 0, "pci_bus_id": "01:00.0",
                                                           "pci_device_id": "290110DE", "product_name": "NVIDIA B200"}])
    gpu = kg.add_known_compute_capability(facts)["gpus"][0]
    assert (gpu["compute_capability"], gpu["compute_capability_source"]) == ("10.0", "product table (B200)")


def test_module_on_the_h100_capture_returns_9_0_and_the_open_flavour(tmp_path):
    # the stand-in answers -q -x with the captured XML and the module's own query with the captured values
    # (index 0, the zeroed UUID of the capture, compute_cap 9.0 as query.csv says)
    smi = _stand_in(tmp_path, "nvidia-smi", f"""case "$1" in
  -q) cat {H100 / 'nvidia-smi-q-x.xml'} ;;
  --query-gpu=index,uuid,compute_cap) echo '0, GPU-00000000-0000-0000-0000-000000000000, 9.0' ;;
  *) exit 2 ;;
esac
""")
    result = _run_module(f"nvidia_smi_path={smi} use_lspci=false", check=True)
    gpu = result["gpus"][0]
    assert gpu["compute_capability"] == "9.0"
    assert gpu["compute_capability_source"] == "nvidia-smi --query-gpu=compute_cap"
    # this machine has no NVIDIA module: the flavour is unknown here, and said so rather than assumed
    assert result["kernel_module"] == {"version": "", "flavour": "", "source": ""}
    # nor is a driver installed on this machine (the stand-in is not on PATH): the reader says so
    assert result["installed_driver"]["present"] is False and result["installed_driver"]["version"] == ""
