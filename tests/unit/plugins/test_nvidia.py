"""Unit tests of filter_plugins/kgn_nvidia.py over the tables of docs/versions.md section D (and E4).

The expected values are written out here from docs/versions.md, independently of the tables in the
plugin, so a typo in either place fails a test.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError

FILTER_DIR = Path(__file__).resolve().parents[3] / "plugins" / "filter"
import ansible_collections.kgn.gpu_nodes.plugins.module_utils.nvidia as kn  # noqa: E402

# D1 table 3, every row: (CUDA release as asked, minimum Linux driver). [CUDA-RN]
TABLE3 = [
    ("13.2.2", "595.71.05"), ("13.2.1", "595.58.03"), ("13.2", "595.45.04"),
    ("13.1.1", "590.48.01"), ("13.1", "590.44.01"),
    ("13.0.2", "580.95.05"), ("13.0.1", "580.82.07"), ("13.0", "580.65.06"),
    ("12.9.1", "575.57.08"), ("12.9", "575.51.03"),
    ("12.8.1", "570.124.06"), ("12.8", "570.26"),
    ("12.6.3", "560.35.05"), ("12.6.1", "560.35.03"), ("12.6.2", "560.35.03"), ("12.6", "560.28.03"),
    ("12.5.1", "555.42.06"), ("12.5", "555.42.02"),
    ("12.4.1", "550.54.15"), ("12.4", "550.54.14"),
    ("12.3.1", "545.23.08"), ("12.3", "545.23.06"),
    ("12.2.2", "535.104.05"), ("12.2.1", "535.86.09"), ("12.2", "535.54.03"),
    ("12.1", "530.30.02"), ("12.1.1", "530.30.02"),
    ("12.0.1", "525.85.12"), ("12.0", "525.60.13"),
    ("11.8", "520.61.05"),
    ("11.7.1", "515.48.07"), ("11.7", "515.43.04"),
    ("11.6.1", "510.47.03"), ("11.6.2", "510.47.03"), ("11.6", "510.39.01"),
    ("11.5", "495.29.05"), ("11.5.1", "495.29.05"), ("11.5.2", "495.29.05"),
    ("11.4.3", "470.82.01"), ("11.4.4", "470.82.01"),
    ("11.4.1", "470.57.02"), ("11.4.2", "470.57.02"),
    ("11.4.0", "470.42.01"),
    ("11.3.0", "465.19.01"), ("11.3.1", "465.19.01"),
    ("11.2.1", "460.32.03"), ("11.2.2", "460.32.03"),
    ("11.2.0", "460.27.03"),
    ("11.1.1", "455.32"), ("11.1", "455.23"),
    ("11.0.3", "450.51.06"), ("11.0.2", "450.51.05"), ("11.0.1", "450.36.06"),
    ("10.2.89", "440.33"), ("10.2", "440.33"),  # the CentOS 7 reference cluster's cuda_10.2.89_440.33.01_linux.run
    ("10.1.105", "418.39"), ("10.1", "418.39"),
    ("10.0.130", "410.48"),
    ("9.2.148", "396.37"), ("9.2.88", "396.26"),
    ("9.1.85", "390.46"),
    ("9.0.76", "384.81"), ("9.0", "384.81"),
]  # fmt: skip


@pytest.mark.parametrize(("cuda", "driver"), TABLE3)
def test_min_driver_matches_every_row_of_table_3(cuda, driver):
    assert kn.nvidia_min_driver(cuda) == driver


@pytest.mark.parametrize(("cuda", "driver"), TABLE3)
def test_table_3_minimum_gives_full_support_and_one_below_does_not(cuda, driver):
    assert kn.nvidia_cuda_compat(driver, cuda)["full"] is True
    parts = [int(p) for p in driver.split(".")]
    below = ".".join(str(p) for p in [parts[0] - 1, *parts[1:]])
    assert kn.nvidia_cuda_compat(below, cuda)["full"] is False


@pytest.mark.parametrize("cuda", ["12.7", "14.0", "8.0", "12.10"])
def test_unknown_cuda_release_names_the_known_ones(cuda):
    with pytest.raises(KgnError, match=r"not in NVIDIA's driver table.*known releases: 9\.0"):
        kn.nvidia_min_driver(cuda)


@pytest.mark.parametrize("bad", ["latest", "", None, 12.4, "12.x", True])
def test_bad_cuda_version_is_refused_with_what_was_given(bad):
    with pytest.raises(KgnError, match=r"nvidia_min_driver: .*CUDA version"):
        kn.nvidia_min_driver(bad)


# D1 table 2: minor-version compatibility per major: (driver, cuda, supported, full, minor).
TABLE2 = [
    ("450.80.02", "11.8", True, False, True),   # 11.x minor compat from 450.80.02
    ("450.80.01", "11.8", False, False, False),
    ("450.51.06", "11.0.3", True, True, False),  # 11.0 shipped with an earlier driver
    ("525.60.13", "12.4", True, False, True),   # 12.x minor compat from 525.60.13
    ("525.60.12", "12.4", False, False, False),
    ("535.216.01-1~deb12u1", "12.4", True, False, True),  # Debian bookworm driver, CUDA 12.4 app
    ("535.216.01-1~deb12u1", "11.8", True, True, False),  # ... and its own 11.8 toolkit
    ("550.163.01-2", "12.4", True, True, False),  # Debian trixie driver and toolkit
    ("535.104.05", "13.0", False, False, False),  # 13.x needs >= 580
    ("580.65.06", "13.2", True, False, True),
    ("580.65.05", "13.0", False, False, False),
    ("595.71.05", "12.0", True, True, False),  # newer drivers run older majors
    ("440.33.01", "10.2.89", True, True, False),  # the CentOS 7 reference cluster's runfile
    ("418.39", "10.2", False, False, False),  # no minor-version compat before 11.x
]  # fmt: skip


@pytest.mark.parametrize(("driver", "cuda", "supported", "full", "minor"), TABLE2)
def test_cuda_compat_applies_table_2(driver, cuda, supported, full, minor):
    result = kn.nvidia_cuda_compat(driver, cuda)
    assert (result["supported"], result["full"], result["minor_version_compat"]) == (supported, full, minor)
    assert isinstance(result["reason"], str)


def test_cuda_compat_reason_says_what_is_needed():
    result = kn.nvidia_cuda_compat("535.104.05", "13.0")
    assert "535.104.05 cannot run CUDA 13.0" in result["reason"]
    assert "580.65.06" in result["reason"]


@pytest.mark.parametrize("bad", [None, 535.1, "branch", True])
def test_bad_driver_version_is_refused(bad):
    with pytest.raises(KgnError, match=r"nvidia_cuda_compat: driver version .* is not a driver version"):
        kn.nvidia_cuda_compat(bad, "12.4")


# D2, every row: (nvidia-smi product name, model, architecture, CC, family, volta MPS, MIG max).
TABLE_D2 = [
    ("Tesla K80", "K80", "Kepler", "3.7", "kepler", False, 0),
    ("Tesla P4", "P4", "Pascal", "6.1", "pascal", False, 0),
    ("Tesla P100-PCIE-16GB", "P100", "Pascal", "6.0", "pascal", False, 0),
    ("Tesla V100S-PCIE-32GB", "V100", "Volta", "7.0", "volta", True, 0),
    ("Tesla V100-SXM2-32GB", "V100", "Volta", "7.0", "volta", True, 0),
    ("Tesla T4", "T4", "Turing", "7.5", "turing", True, 0),
    ("NVIDIA A10", "A10", "Ampere", "8.6", "ampere", True, 0),
    ("NVIDIA A30", "A30", "Ampere", "8.0", "ampere", True, 4),
    ("NVIDIA A100-SXM4-80GB", "A100", "Ampere", "8.0", "ampere", True, 7),
    ("NVIDIA A100-PCIE-40GB", "A100", "Ampere", "8.0", "ampere", True, 7),
    ("NVIDIA L4", "L4", "Ada Lovelace", "8.9", "ada-lovelace", True, 0),
    ("NVIDIA L40S", "L40S", "Ada Lovelace", "8.9", "ada-lovelace", True, 0),
    ("NVIDIA H100 80GB HBM3", "H100", "Hopper", "9.0", "hopper", True, 7),
    ("NVIDIA H100 PCIe", "H100", "Hopper", "9.0", "hopper", True, 7),
    ("NVIDIA H200", "H200", "Hopper", "9.0", "hopper", True, 7),
    ("NVIDIA H200 NVL", "H200", "Hopper", "9.0", "hopper", True, 7),
    ("NVIDIA GH200 480GB", "GH200", "Hopper", "9.0", "hopper", True, 7),
    ("NVIDIA B200", "B200", "Blackwell", "10.0", "blackwell", True, 7),
]


@pytest.mark.parametrize(("product", "model", "arch", "cc", "family", "mps", "mig"), TABLE_D2)
def test_gpu_info_matches_every_row_of_d2(product, model, arch, cc, family, mps, mig):
    info = kn.nvidia_gpu_info(product)
    assert info["model"] == model
    assert info["architecture"] == arch
    assert info["compute_capability"] == cc
    assert info["family"] == family
    assert info["volta_mps"] is mps
    assert info["mig_max_instances"] == mig
    assert info["mig_capable"] is (mig > 0)
    assert info["open_modules_supported"] is (arch not in ("Kepler", "Pascal", "Volta"))


@pytest.mark.parametrize(
    ("product", "mig_min_driver"),
    [
        ("NVIDIA A100-SXM4-80GB", "450.80.02"),
        ("NVIDIA A30", "460.73.01"),
        ("NVIDIA H100 80GB HBM3", "525.85.12"),
        ("NVIDIA H200", "550.90.07"),
        ("NVIDIA B200", "570.133.20"),
        ("Tesla T4", None),
    ],
)
def test_mig_minimum_driver_follows_the_r620_table(product, mig_min_driver):
    assert kn.nvidia_gpu_info(product)["mig_min_driver"] == mig_min_driver


def test_unknown_gpu_fails_strict_and_is_none_otherwise():
    with pytest.raises(KgnError, match=r"unknown GPU product 'GeForce GTX 1050'.*known models: K80"):
        kn.nvidia_gpu_info("GeForce GTX 1050")
    assert kn.nvidia_gpu_info("GeForce GTX 1050", strict=False) is None


# E4 getArchFamily, every range.
@pytest.mark.parametrize(
    ("cc", "family"),
    [
        ("3.0", "kepler"),
        ("3.7", "kepler"),
        ("5.2", "maxwell"),
        ("6.0", "pascal"),
        ("6.1", "pascal"),
        ("7.0", "volta"),
        ("7.2", "volta"),
        ("7.4", "volta"),
        ("7.5", "turing"),
        ("8.0", "ampere"),
        ("8.6", "ampere"),
        ("8.7", "ampere"),
        ("8.8", "ampere"),
        ("8.9", "ada-lovelace"),
        ("9.0", "hopper"),
        ("10.0", "blackwell"),
        ("12.0", "blackwell"),
        ("13.0", "rubin"),
    ],
)
def test_gpu_family_follows_getarchfamily(cc, family):
    assert kn.nvidia_gpu_family(cc) == family


@pytest.mark.parametrize("bad", [7.5, "7", "turing", "4.0"])
def test_gpu_family_refuses_bad_input(bad):
    with pytest.raises(KgnError, match="nvidia_gpu_family: compute capability"):
        kn.nvidia_gpu_family(bad)


# D3: (branch, GPU, kernel module, supported, part of the reason).
TABLE_D3 = [
    ("470", "Tesla K80", "proprietary", True, "supports"),
    ("535", "Tesla K80", "proprietary", False, "R470 is the last branch for Kepler"),
    ("580", "Tesla P100-PCIE-16GB", "proprietary", True, "supports"),
    ("590", "Tesla P4", "proprietary", False, "R580 is the last branch for Pascal"),
    ("580.95.05", "Tesla V100S-PCIE-32GB", "proprietary", True, "supports"),
    ("595", "Tesla V100S-PCIE-32GB", "proprietary", False, "R580 is the last branch for Volta"),
    ("535", "Tesla V100S-PCIE-32GB", "open", False, "open kernel modules need Turing or newer"),
    ("535", "Tesla T4", "open", True, "supports"),
    ("510", "Tesla T4", "open", False, "open kernel modules exist from R515"),
    ("595", "Tesla T4", "proprietary", True, "supports"),
    ("440", "NVIDIA A100-SXM4-80GB", "proprietary", False, "needs R450 or newer"),
    ("450", "NVIDIA A100-SXM4-80GB", "proprietary", True, "supports"),
    ("515", "NVIDIA H100 80GB HBM3", "open", False, "needs R520 or newer"),
    ("535", "NVIDIA H100 80GB HBM3", "proprietary", True, "supports"),
    ("550", "NVIDIA GH200 480GB", "proprietary", False, "open kernel modules only"),
    ("550", "NVIDIA GH200 480GB", "open", True, "supports"),
    ("570", "NVIDIA B200", "proprietary", False, "open kernel modules only"),
    ("570", "NVIDIA B200", "open", True, "supports"),
    ("560", "NVIDIA B200", "open", False, "needs R570 or newer"),
]


@pytest.mark.parametrize(("branch", "gpu", "module", "supported", "reason"), TABLE_D3)
def test_branch_supports_gpu_follows_d3(branch, gpu, module, supported, reason):
    result = kn.nvidia_branch_supports_gpu(branch, gpu, module)
    assert result["supported"] is supported
    assert reason in result["reason"]


def test_branch_check_accepts_a_gpu_info_dict_and_an_int_branch():
    info = kn.nvidia_gpu_info("Tesla K80")
    assert kn.nvidia_branch_supports_gpu(470, info)["supported"] is True


def test_branch_check_refuses_an_unknown_module_flavour():
    with pytest.raises(KgnError, match=r"kernel_module 'closed' is not one of proprietary, open"):
        kn.nvidia_branch_supports_gpu("535", "Tesla T4", "closed")


# Labels: accelerator=nvidia-tesla-<model> as in the reference clusters, GFD-style nvidia.com/* (E4).
@pytest.mark.parametrize(
    ("product", "label"),
    [
        ("Tesla T4", "nvidia-tesla-t4"),
        ("Tesla K80", "nvidia-tesla-k80"),
        ("Tesla P100", "nvidia-tesla-p100"),
        ("NVIDIA A100-SXM4-80GB", "nvidia-a100-sxm4-80gb"),
        ("NVIDIA H100 80GB HBM3", "nvidia-h100-80gb-hbm3"),
        ("Tesla V100S-PCIE-32GB", "nvidia-tesla-v100s-pcie-32gb"),
    ],
)
def test_accelerator_label_matches_the_reference_clusters(product, label):
    assert kn.nvidia_accelerator_label(product) == label


def test_accelerator_label_is_a_valid_label_value_for_long_names():
    value = kn.nvidia_accelerator_label("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition " * 2)
    assert len(value) <= 63 and value[-1].isalnum()


@pytest.mark.parametrize(
    ("package", "upstream"),
    [
        ("535.216.01-1~deb12u1", "535.216.01"),
        ("550.163.01-2", "550.163.01"),
        ("1:570.86.15-0ubuntu1", "570.86.15"),
        ("3:580.65.06-1.el9", "580.65.06"),
    ],
)
def test_upstream_version_strips_epoch_and_revision(package, upstream):
    assert kn.nvidia_upstream_version(package) == upstream


def _facts(product, cc=None, mig="N/A", count=1):
    gpu = {"product_name": product, "memory_total_mib": 15360, "mig_mode_current": mig, "compute_capability": cc}
    return {"gpu_present": True, "driver_version": "535.104.05", "cuda_version": "12.2", "gpus": [gpu] * count}


def test_gfd_labels_for_a_t4_node():
    labels = kn.nvidia_gfd_labels(_facts("Tesla T4", count=2))
    assert labels == {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.count": "2",
        "nvidia.com/gpu.product": "Tesla-T4",
        "nvidia.com/gpu.memory": "15360",
        "nvidia.com/gpu.compute.major": "7",
        "nvidia.com/gpu.compute.minor": "5",
        "nvidia.com/gpu.family": "turing",
        "nvidia.com/mig.capable": "false",
        "nvidia.com/cuda.driver-version.major": "535",
        "nvidia.com/cuda.driver-version.minor": "104",
        "nvidia.com/cuda.driver-version.revision": "05",
        "nvidia.com/cuda.driver-version.full": "535.104.05",
        "nvidia.com/cuda.runtime-version.major": "12",
        "nvidia.com/cuda.runtime-version.minor": "2",
        "nvidia.com/cuda.runtime-version.full": "12.2",
    }


def test_gfd_labels_prefer_the_compute_capability_nvidia_smi_reports_and_see_mig():
    labels = kn.nvidia_gfd_labels(_facts("NVIDIA A100-SXM4-80GB", cc="8.0", mig="Enabled"))
    assert labels["nvidia.com/gpu.family"] == "ampere"
    assert labels["nvidia.com/mig.capable"] == "true"


def test_gfd_labels_without_gpu_only_say_absent():
    assert kn.nvidia_gfd_labels({"gpus": []}) == {"nvidia.com/gpu.present": "false"}


def test_gfd_labels_refuse_something_else():
    with pytest.raises(KgnError, match="result of the gpu_facts module"):
        kn.nvidia_gfd_labels(["Tesla T4"])


def test_every_result_is_plain_data():
    results = [
        kn.nvidia_cuda_compat("535", "12.4"),
        kn.nvidia_gpu_info("Tesla T4"),
        kn.nvidia_branch_supports_gpu("535", "Tesla T4"),
        kn.nvidia_gfd_labels(_facts("Tesla T4")),
    ]
    plain = (str, int, bool, type(None))
    for result in results:
        assert all(isinstance(v, plain) for v in result.values())


# apt sources: which non-free components the driver still needs (stock Debian 12 and 13 layouts).
STOCK_BOOKWORM = {
    "path": "/etc/apt/sources.list",
    "content": "deb http://deb.debian.org/debian bookworm main non-free-firmware\n"
    "deb-src http://deb.debian.org/debian bookworm main non-free-firmware non-free\n"
    "deb http://security.debian.org/debian-security bookworm-security main non-free-firmware\n"
    "# deb http://deb.debian.org/debian bookworm-updates main non-free\n",
}
STOCK_TRIXIE = {
    "path": "/etc/apt/sources.list.d/debian.sources",
    "content": "Types: deb\nURIs: http://deb.debian.org/debian\nSuites: trixie trixie-updates\n"
    "Components: main non-free-firmware\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n"
    "Types: deb\nURIs: http://deb.debian.org/debian-security\nSuites: trixie-security\n"
    "Components: main non-free-firmware non-free\nEnabled: no\n",
}


def test_missing_components_on_a_stock_bookworm():
    missing = kn.nvidia_apt_missing_components(
        [STOCK_BOOKWORM], ["bookworm", "bookworm-updates", "bookworm-security"], ["non-free", "non-free-firmware"]
    )
    assert missing == [
        {"suite": "bookworm", "components": ["non-free"]},
        {"suite": "bookworm-updates", "components": ["non-free", "non-free-firmware"]},
        {"suite": "bookworm-security", "components": ["non-free"]},
    ]


def test_missing_components_read_deb822_and_skip_disabled_stanzas():
    missing = kn.nvidia_apt_missing_components(
        [STOCK_TRIXIE], ["trixie", "trixie-updates", "trixie-security"], ["non-free", "non-free-firmware"]
    )
    assert missing == [
        {"suite": "trixie", "components": ["non-free"]},
        {"suite": "trixie-updates", "components": ["non-free"]},
        {"suite": "trixie-security", "components": ["non-free", "non-free-firmware"]},
    ]


def test_nothing_missing_when_another_file_already_enables_it():
    extra = {
        "path": "/etc/apt/sources.list.d/nonfree.list",
        "content": "deb [signed-by=/k.gpg] http://mirror.local/debian bookworm non-free contrib\n",
    }
    assert kn.nvidia_apt_missing_components([STOCK_BOOKWORM, extra], ["bookworm"], ["non-free"]) == []


def test_missing_components_refuses_other_input():
    with pytest.raises(KgnError, match=r"list of \{path, content\} dicts"):
        kn.nvidia_apt_missing_components(["deb http://x bookworm main"], ["bookworm"], ["non-free"])


def test_pin_package_pins_all_but_the_unpinned():
    pinned = [
        kn.nvidia_pin_package(p, "535.216.01-1~deb12u1", ["nvidia-persistenced"])
        for p in ("nvidia-driver", "nvidia-persistenced")
    ]
    assert pinned == ["nvidia-driver=535.216.01-1~deb12u1", "nvidia-persistenced"]


def test_pin_package_refuses_an_empty_version():
    with pytest.raises(KgnError, match="version '' must be the package version to pin"):
        kn.nvidia_pin_package("nvidia-driver", "")


def test_apt_unmet_exact_wildcard_and_unversioned_specs():
    installed = ["nvidia-driver=535.216.01-1~deb12u1", "nvidia-persistenced=535.171.04-1",
                 "nvidia-container-toolkit=1.17.8-1"]
    wanted = ["nvidia-driver=535.216.01-1~deb12u1", "nvidia-persistenced", "nvidia-container-toolkit=1.17.8*"]
    assert kn.nvidia_apt_unmet(wanted, installed) == []


def test_apt_unmet_names_missing_and_other_versions_in_order():
    installed = ["nvidia-driver=535.183.01-1~deb12u1", "nvidia-container-toolkit=1.16.2-1"]
    wanted = ["nvidia-driver=535.216.01-1~deb12u1", "firmware-nvidia-gsp=535.216.01-1~deb12u1",
              "nvidia-container-toolkit=1.17.8*", "nvidia-persistenced"]
    assert kn.nvidia_apt_unmet(wanted, installed) == wanted


def test_apt_unmet_wildcard_is_a_prefix_not_a_substring():
    assert kn.nvidia_apt_unmet(["nvidia-container-toolkit=1.17*"], ["nvidia-container-toolkit=11.17.0-1"]) == [
        "nvidia-container-toolkit=1.17*"
    ]


@pytest.mark.parametrize(
    ("wanted", "installed", "message"),
    [
        ("nvidia-driver", [], "wanted 'nvidia-driver' must be a list of apt specs"),
        (["nvidia-driver"], ["nvidia-driver"], "must be a list of 'name=version' strings"),
    ],
)
def test_apt_unmet_refuses_malformed_input(wanted, installed, message):
    with pytest.raises(KgnError, match=message):
        kn.nvidia_apt_unmet(wanted, installed)
