"""Branch and kernel module flavour choices (module_utils/driver/driver_choice.py through driver.driver_plan), the
driver and OS lifecycles (module_utils/driver/lifecycle.py), and the per-kernel module plan (driver_kernels.py).

The date is fixed (2026-11-26): NVIDIA then supports R580 (LTSB, until August 2028) and R595 (PB, until March
2027); R535 ended in June 2026 and R550 earlier (docs/driver-branches.md).
"""

from __future__ import annotations

import pytest
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.driver import driver as kd
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.driver import driver_state, lifecycle
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.driver.driver_kernels import kernel_plan
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.nvidia import driver_version_matches
from os_releases import OS

TODAY = "2026-11-26"
INPUTS = {"source": "distro", "branch": "auto", "version": "", "kernel_module": "auto", "hold": True,
          "kernel_headers": True, "cuda_repo_base_url": "https://developer.download.nvidia.com/compute/cuda/repos",
          "today": TODAY}
GPUS = {"T4": "Tesla T4", "V100": "Tesla V100-SXM2-16GB", "A100": "NVIDIA A100-SXM4-80GB",
        "H100": "NVIDIA H100 80GB HBM3", "B200": "NVIDIA B200"}


def choose(os_name, gpus, source="distro", **inputs):
    observed = {"os": OS[os_name], "gpu": {"gpus": [{"product_name": GPUS[g]} for g in gpus]}}
    return kd.driver_plan({**INPUTS, "source": inputs.pop("source", source), **inputs}, observed)


# (OS, source, GPU) -> (branch, flavour): the newest branch NVIDIA supports that the source offers and that
# drives the GPU; open from R560 for Turing and newer, proprietary before Turing.
CHOICES = [
    ("Debian-12", "distro", "T4", "535", "proprietary"),
    ("Debian-12", "distro", "V100", "535", "proprietary"),
    ("Debian-12", "distro", "H100", "535", "proprietary"),
    ("Debian-13", "distro", "A100", "550", "proprietary"),
    ("Debian-13", "distro", "H100", "550", "proprietary"),
    ("Ubuntu-24", "distro", "T4", "595", "open"),
    ("Ubuntu-24", "distro", "V100", "580", "proprietary"),
    ("Ubuntu-24", "distro", "A100", "595", "open"),
    ("Ubuntu-26", "distro", "H100", "595", "open"),
    ("Ubuntu-26", "distro", "B200", "595", "open"),
    ("Ubuntu-26", "distro", "V100", "580", "proprietary"),
    ("Ubuntu-26", "cuda_repo", "B200", "595", "open"),
    ("Rocky-10", "cuda_repo", "T4", "595", "open"),
    ("Rocky-10", "cuda_repo", "V100", "580", "proprietary"),
    ("Rocky-10", "cuda_repo", "B200", "595", "open"),
]


@pytest.mark.parametrize(("os_name", "source", "gpu", "branch", "flavour"), CHOICES)
def test_auto_chooses_branch_and_flavour(os_name, source, gpu, branch, flavour):
    plan = choose(os_name, [gpu], source)
    assert (plan["branch"], plan["kernel_module"]) == (branch, flavour)
    assert plan["branch_choice"]["how"].startswith("auto")


def test_a_source_with_only_ended_branches_is_used_and_said():
    plan = choose("Debian-12", ["T4"])
    assert plan["branch_choice"]["how"] == "auto (no branch the source offers is still supported by NVIDIA)"
    assert plan["branch_choice"]["lifecycle"] == {"branch": "535", "status": "ended", "designation": "LTSB",
                                                  "eol": "2026-06", "source": lifecycle.BRANCH_SOURCE}
    assert any(w.startswith("driver branch R535 is past NVIDIA's end of life (2026-06)") for w in plan["warnings"])


def test_auto_keeps_the_installed_branch_that_drives_the_gpus():
    observed = {"os": OS["Ubuntu-24"], "gpu": {"gpus": [{"product_name": GPUS["T4"]}]},
                "driver": {"present": True, "owned": True, "package_version": "580.95.05"}}
    plan = kd.driver_plan(INPUTS, observed)
    assert (plan["branch"], plan["branch_choice"]["how"], plan["branch_choice"]["newest_supported"]) == (
        "580", "installed", "595")


@pytest.mark.parametrize(("os_name", "gpus", "inputs", "message"), [
    # a Blackwell GPU on a source whose only branch predates it
    ("Debian-13", ["B200"], {}, r"nvidia_driver_branch=auto: no branch the source offers \(550\) drives this node's "
                                r"GPUs: NVIDIA B200 \(Blackwell\) need R570 or newer, the first branch that supports "
                                r"them"),
    # an explicit branch older than the GPU needs: the GPU and the first branch named
    ("Ubuntu-24", ["B200"], {"branch": "535"}, r"nvidia_driver_branch 535 cannot drive this node's GPUs: NVIDIA "
                                                  r"B200 \(Blackwell\) need R570 or newer"),
    # an explicit branch newer than Volta's last
    ("Ubuntu-24", ["V100"], {"branch": "595"}, r"Tesla V100-SXM2-16GB \(Volta\) are supported up to R580, the last "
                                                  r"branch for them"),
    # a source whose oldest branch is newer than the GPU's last: the hint points at older branches
    ("Ubuntu-26", ["V100"], {"source": "cuda_repo"}, r"no branch the source offers \(595, 610, 620\) drives this "
                                                       r"node's GPUs: Tesla V100-SXM2-16GB \(Volta\) are supported up "
                                                       r"to R580.*Use a source that carries an older branch"),
    # the flavour the wrong way round, naming the GPU
    ("Ubuntu-24", ["V100"], {"branch": "580", "kernel_module": "open"},
     r"kernel_module=open cannot drive Tesla V100-SXM2-16GB \(Volta\): the open kernel modules need Turing"),
    ("Ubuntu-24", ["B200"], {"kernel_module": "proprietary"},
     r"kernel_module=proprietary cannot drive NVIDIA B200 \(Blackwell\): they run only with the open kernel modules"),
    # one node, two GPUs that need different flavours
    ("Ubuntu-24", ["V100", "B200"], {}, r"(no branch the source offers|need both kernel module flavours)"),
    ("Ubuntu-24", ["V100", "B200"], {"branch": "580"},
     r"need both kernel module flavours.*NVIDIA B200 \(Blackwell\) run only with the open modules, Tesla V100"),
])
def test_refusals_name_the_gpu(os_name, gpus, inputs, message):
    with pytest.raises(KgnError, match=message):
        choose(os_name, gpus, **inputs)


@pytest.mark.parametrize(("os_name", "gpu", "inputs", "branch", "flavour"), [
    # the field-note clusters pin 535-era and older drivers: explicit branches and versions keep working
    ("Ubuntu-24", "T4", {"branch": "535", "kernel_module": "proprietary"}, "535", "proprietary"),
    ("Ubuntu-24", "T4", {"branch": "535"}, "535", "proprietary"),  # auto flavour: R535 predates R560
    ("CentOS-7", "V100", {"source": "cuda_repo", "version": "460.32.03"}, "460", "proprietary"),
    ("CentOS-7", "T4", {"source": "cuda_repo", "branch": "510", "version": "510.47.03"}, "510", "proprietary"),
])
def test_explicit_branches_and_versions_keep_working(os_name, gpu, inputs, branch, flavour):
    plan = choose(os_name, [gpu], **inputs)
    assert (plan["branch"], plan["kernel_module"]) == (branch, flavour)


def test_adopted_driver_flavour_is_read_never_assumed():
    h100 = {"os": OS["Ubuntu-24"], "gpu": {"gpus": [{"product_name": GPUS["H100"]}]},
            "driver": {"present": True, "owned": False, "version": "580.159.04", "kernel_module": "open",
                       "kernel_module_source": "/proc/driver/nvidia/version"}}
    plan = kd.driver_plan(INPUTS, h100)
    assert plan["adopted"]["kernel_module"] == "open" and plan["kernel_module"] == "open"
    assert plan["kernel_module_choice"] == {"flavour": "open", "how": "read from /proc/driver/nvidia/version"}
    assert plan["branch_choice"]["how"] == "adopted" and plan["branch_choice"]["branch"] == "580"
    unknown = {**h100, "driver": {**h100["driver"], "kernel_module": "", "kernel_module_source": ""}}
    assert kd.driver_plan(INPUTS, unknown)["kernel_module"] == "unknown"
    b200 = {**h100, "gpu": {"gpus": [{"product_name": GPUS["B200"]}]},
            "driver": {**h100["driver"], "kernel_module": "proprietary"}}
    with pytest.raises(KgnError, match=r"the driver found on the node \(580.159.04, adopted\) runs the proprietary "
                                       r"kernel modules; NVIDIA B200 \(Blackwell\) run only with the open ones"):
        kd.driver_plan(INPUTS, b200)


# --- nvidia_driver_source: auto ----------------------------------------------------------------------------------

EL_GUIDE = "https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/introduction.html"
EL7_GUIDE = "https://developer.download.nvidia.com/compute/github-demos/yum-packaging-nvidia-driver/guide-rhel7"
# (os-release, source auto takes, the OS as the plan names it, NVIDIA's repository for it)
DEFAULT_SOURCES = [
    ({"id": "rocky", "version_id": "8.10", "id_like": "rhel centos fedora"}, "cuda_repo", "Rocky Linux 8", "rhel8"),
    ({"id": "rocky", "version_id": "9.5", "id_like": "rhel centos fedora"}, "cuda_repo", "Rocky Linux 9", "rhel9"),
    ({"id": "rocky", "version_id": "10.0", "id_like": "rhel centos fedora"}, "cuda_repo", "Rocky Linux 10", "rhel10"),
    ({"id": "rhel", "version_id": "8.10", "id_like": "fedora"}, "cuda_repo", "Red Hat Enterprise Linux 8", "rhel8"),
    ({"id": "rhel", "version_id": "9.4", "id_like": "fedora"}, "cuda_repo", "Red Hat Enterprise Linux 9", "rhel9"),
    ({"id": "rhel", "version_id": "10.0", "id_like": "fedora"}, "cuda_repo", "Red Hat Enterprise Linux 10", "rhel10"),
    ({"id": "almalinux", "version_id": "8.10", "id_like": "rhel centos fedora"}, "cuda_repo", "AlmaLinux 8", "rhel8"),
    ({"id": "almalinux", "version_id": "9.5", "id_like": "rhel centos fedora"}, "cuda_repo", "AlmaLinux 9", "rhel9"),
    ({"id": "almalinux", "version_id": "10.0", "id_like": "rhel centos fedora"}, "cuda_repo", "AlmaLinux 10",
     "rhel10"),
    ({"id": "ol", "version_id": "9.4", "id_like": "fedora"}, "cuda_repo", "Oracle Linux 9", "rhel9"),
    ({"id": "centos", "version_id": "7", "id_like": "rhel fedora"}, "cuda_repo", "CentOS Linux 7", "rhel7"),
    ({"id": "ol", "version_id": "7.9", "id_like": "fedora"}, "cuda_repo", "Oracle Linux 7", "rhel7"),
    # the project's default where the distribution packages the driver stays its own packages (the lab runs them)
    ({"id": "debian", "version_id": "12"}, "distro", "Debian 12", ""),
    ({"id": "debian", "version_id": "13"}, "distro", "Debian 13", ""),
    ({"id": "ubuntu", "version_id": "20.04", "id_like": "debian"}, "distro", "Ubuntu 20.04", ""),
    ({"id": "ubuntu", "version_id": "22.04", "id_like": "debian"}, "distro", "Ubuntu 22.04", ""),
    ({"id": "ubuntu", "version_id": "24.04", "id_like": "debian"}, "distro", "Ubuntu 24.04", ""),
    ({"id": "ubuntu", "version_id": "26.04", "id_like": "debian"}, "distro", "Ubuntu 26.04", ""),
]


@pytest.mark.parametrize(("os_release", "source", "named", "repo"), DEFAULT_SOURCES,
                         ids=[f"{o['id']}-{o['version_id']}" for o, *_ in DEFAULT_SOURCES])
def test_auto_source_is_what_the_os_documents(os_release, source, named, repo):
    chosen = kd.source_choice("auto", os_release)
    assert (chosen["source"], chosen["how"]) == (source, "auto")
    assert chosen["words"] == f"source: {source} ({chosen['why']})"
    assert chosen["why"].startswith(f"the default for {named}: ")
    if source == "cuda_repo":
        guide = (f"NVIDIA's RHEL 7 packaging guide, {EL7_GUIDE}" if repo == "rhel7"
                 else f"NVIDIA's driver installation guide, {EL_GUIDE}")
        assert chosen["why"].endswith(f"the distribution ships no NVIDIA driver; NVIDIA's CUDA repository {repo}, "
                                      f"as documented in {guide}")
    else:
        assert "the distribution packages the NVIDIA driver itself (branch" in chosen["why"]
        assert chosen["why"].endswith("nvidia_driver_source=cuda_repo takes NVIDIA's CUDA repository instead")


def test_a_first_run_on_rocky_10_plans_nvidias_repository_and_says_why():
    """The default inputs on Rocky 10 used to be refused ("no branch the source offers (none)")."""
    plan = choose("Rocky-10", ["H100"], source="auto")
    assert (plan["source"], plan["platform"], plan["branch"], plan["kernel_module"]) == (
        "cuda_repo", "RedHat-10", "595", "open")
    assert plan["source_choice"] == {
        "source": "cuda_repo", "how": "auto",
        "why": "the default for Rocky Linux 10: the distribution ships no NVIDIA driver; NVIDIA's CUDA repository "
               f"rhel10, as documented in NVIDIA's driver installation guide, {EL_GUIDE}",
        "words": "source: cuda_repo (the default for Rocky Linux 10: the distribution ships no NVIDIA driver; NVIDIA's "
                 f"CUDA repository rhel10, as documented in NVIDIA's driver installation guide, {EL_GUIDE})",
    }
    assert plan["cuda_repo_url"] == "https://developer.download.nvidia.com/compute/cuda/repos/rhel10/x86_64"
    assert plan["packages"] == ["nvidia-open", "nvidia-driver-cuda", "nvidia-persistenced"]
    assert plan["branch_lock"] == "*nvidia*595*"
    # the same plan as nvidia_driver_source=cuda_repo written out, but for the record of why
    asked = choose("Rocky-10", ["H100"], source="cuda_repo")
    assert asked["source_choice"]["how"] == "asked"
    assert {k: v for k, v in plan.items() if k != "source_choice"} == {
        k: v for k, v in asked.items() if k != "source_choice"}


def test_auto_on_debian_plans_exactly_what_distro_did():
    plan, asked = choose("Debian-12", ["T4"], source="auto"), choose("Debian-12", ["T4"], source="distro")
    assert plan["source"] == "distro" and plan["source_choice"]["why"].startswith(
        "the default for Debian 12: the distribution packages the NVIDIA driver itself (branch 535)")
    assert {k: v for k, v in plan.items() if k != "source_choice"} == {
        k: v for k, v in asked.items() if k != "source_choice"}


@pytest.mark.parametrize("os_name", ["Rocky-10", "Debian-12", "Ubuntu-24", "CentOS-7"])
@pytest.mark.parametrize("source", ["distro", "cuda_repo", "runfile"])
def test_an_explicit_source_is_kept_as_asked(os_name, source):
    chosen = kd.source_choice(source, OS[os_name])
    assert chosen == {"source": source, "how": "asked", "why": f"asked: nvidia_driver_source={source}",
                      "words": f"source: {source} (asked: nvidia_driver_source={source})"}


def test_explicit_sources_plan_as_before():
    runfile = choose("Rocky-10", ["T4"], source="runfile",
                     runfile_url="http://mirror.local/NVIDIA-Linux-x86_64-580.95.05.run")
    assert (runfile["source"], runfile["packages"], runfile["runfile"]["target"]) == ("runfile", [], "580.95.05")
    deb_cuda = choose("Debian-12", ["H100"], source="cuda_repo")
    assert (deb_cuda["source"], deb_cuda["packages"]) == ("cuda_repo", ["nvidia-open-595"])
    ubuntu = choose("Ubuntu-24", ["T4"], source="distro")
    assert ubuntu["packages"][0] == "nvidia-headless-595-server-open"


def test_distro_on_el_is_refused_saying_the_os_ships_no_driver():
    with pytest.raises(KgnError, match=r"nvidia_driver_source=distro is not available on RedHat-10: it has no "
                                       r"distribution driver packages \(Rocky Linux 10 ships no NVIDIA driver\)\. Use "
                                       r"nvidia_driver_source=auto \(the default: NVIDIA's CUDA repository here\), "
                                       r"cuda_repo or runfile"):
        choose("Rocky-10", ["T4"], source="distro")


@pytest.mark.parametrize("os_release", [
    {"id": "amzn", "version_id": "2023", "id_like": "fedora"},
    {"id": "sles", "version_id": "15.6", "id_like": "suse"},
    {"id": "arch", "version_id": "20260101"},
])
def test_auto_on_an_os_the_role_does_not_know_names_the_setting_and_its_choices(os_release):
    with pytest.raises(KgnError, match=r"nvidia_driver_source=auto: no default source for .* an OS the role does not "
                                       r"install the driver on \(it supports Debian-12, .*RedHat-10\)\. "
                                       r"nvidia_driver_source must be one of auto, distro, cuda_repo, runfile$"):
        kd.driver_plan({**INPUTS, "source": "auto"}, {"os": os_release})
    # an explicit source on such an OS gets the platform refusal it always got
    with pytest.raises(KgnError, match=r"supports Debian-12, .*; this host is"):
        kd.driver_plan({**INPUTS, "source": "cuda_repo"}, {"os": os_release})


def test_auto_without_the_os_is_refused_never_guessed():
    with pytest.raises(KgnError, match=r"set kgn_observed_nvidia_driver\.os\.id/version_id"):
        kd.source_choice("auto", {})


def test_a_source_outside_the_choices_is_refused():
    with pytest.raises(KgnError, match=r"nvidia_driver_source is 'ppa'; it must be one of auto, distro, cuda_repo, "
                                       r"runfile"):
        kd.source_choice("ppa", OS["Rocky-10"])


def test_the_adopted_centos_7_drivers_stay_adopted_under_the_default():
    """The field-note CentOS 7.9 nodes: runfile drivers no package owns, kept as they are (inventories/examples)."""
    observed = {"os": OS["CentOS-7"], "architecture": "x86_64",
                "driver": {"present": True, "owned": False, "version": "460.32.03",
                           "nvidia_smi": "/usr/bin/nvidia-smi"}}
    plan = kd.driver_plan({**INPUTS, "source": "auto", "branch": "460", "version": "460.32.03"}, observed)
    assert plan["adopted"]["version"] == "460.32.03" and plan["specs"] == [] and plan["missing"] == []
    assert plan["source"] == "cuda_repo" and plan["source_choice"]["how"] == "auto"
    assert [f["path"] for f in plan["files"] if f["content"] is not None] == ["/etc/yum.conf", kd.FILES["blacklist"]]


def test_the_module_reads_the_packages_of_the_resolved_source():
    # observe() asks driver_packages with the role's inputs as given: auto is resolved there too
    basics = kd.driver_packages({**INPUTS, "source": "auto"}, {"os": OS["Rocky-10"]})
    assert (basics["source"], basics["family"], basics["packages"][0]) == ("cuda_repo", "redhat", "nvidia-open")
    assert basics["choice"]["platform"] == "RedHat-10"


def test_no_gpu_facts_chooses_by_branch_and_says_so():
    plan = kd.driver_plan({**INPUTS, "source": "cuda_repo"}, {"os": OS["Rocky-10"]})
    assert (plan["branch"], plan["kernel_module"]) == ("595", "open")
    assert any("no GPU facts recorded" in a for a in plan["assumed"])


def test_r620_has_no_proprietary_modules():
    with pytest.raises(KgnError, match="R620 has no proprietary kernel modules"):
        choose("Rocky-10", ["T4"], "cuda_repo", branch="620", kernel_module="proprietary")
    assert choose("Rocky-10", ["T4"], "cuda_repo", branch="620")["kernel_module"] == "open"


# --- lifecycles ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("os_release", "status", "eol"), [
    ({"id": "centos", "version_id": "7"}, "eol", "2024-06-30"),
    ({"id": "ol", "version_id": "7.9"}, "eol", "2024-12-31"),
    ({"id": "ubuntu", "version_id": "20.04"}, "eol", "2025-05-31"),
    ({"id": "debian", "version_id": "12"}, "eol", "2026-07-11"),
    ({"id": "debian", "version_id": "13"}, "supported", "2028-08-09"),
    ({"id": "ubuntu", "version_id": "26.04"}, "supported", "2031-04-30"),
    ({"id": "rocky", "version_id": "10.1"}, "supported", "2035-05-31"),
    ({"id": "ol", "version_id": "10"}, "supported", ""),
    ({"id": "gentoo", "version_id": "2.17"}, "unknown", ""),
])
def test_os_lifecycle(os_release, status, eol):
    state = lifecycle.os_lifecycle(os_release, TODAY)
    assert (state["status"], state["eol"]) == (status, eol)
    assert bool(state["message"]) == (status == "eol")


def test_an_eol_os_says_the_date_the_source_and_the_current_releases():
    state = lifecycle.os_lifecycle({"id": "ubuntu", "version_id": "20.04"}, TODAY)
    assert state["current"] == ["22", "24", "26"]
    assert state["message"] == (
        "Ubuntu 20.04 LTS is past its end of life since 2025-05-31 (Ubuntu Pro ESM until 2030-04-02), per "
        "https://ubuntu.com/about/release-cycle; current releases: Ubuntu 22.04 LTS, Ubuntu 24.04 LTS, Ubuntu 26.04 "
        "LTS. It keeps working as it did")
    centos = lifecycle.os_lifecycle({"id": "centos", "version_id": "7"}, TODAY)
    assert "(no vendor support left)" in centos["message"] and centos["current"] == []
    assert "current releases: none (CentOS Linux ended; RHEL, Rocky Linux and AlmaLinux" in centos["message"]
    # the plan of an EOL node still works and carries the warning
    plan = kd.driver_plan({**INPUTS, "source": "cuda_repo", "branch": "460"}, {"os": OS["CentOS-7"]})
    assert plan["os_lifecycle"]["status"] == "eol" and plan["warnings"][0].startswith("CentOS Linux 7 is past")


@pytest.mark.parametrize(("branch", "day", "status"), [
    ("580", "2028-08-31", "supported"), ("580", "2028-09-01", "ended"), ("595", TODAY, "supported"),
    ("535", "2026-06-30", "supported"), ("535", "2026-07-01", "ended"), ("550", TODAY, "ended"),
    ("470", TODAY, "ended"), ("620", TODAY, "unlisted"),
])
def test_branch_lifecycle(branch, day, status):
    assert lifecycle.branch_lifecycle(branch, day)["status"] == status


# --- "does the installed driver match the pin": one rule -----------------------------------------------------


@pytest.mark.parametrize(("found", "wanted", "matches"), [
    ("535.309.01", "", True), ("", "535", False),
    ("535.309.01", "535", True), ("1:535.309.01-1~deb12u1", "535", True), ("5350.1", "535", False),
    ("535.309.01-0+deb12u1", "535.309.01", True), ("535.309.011", "535.309.01", False),
    ("3:580.105.08-1.el9", "580.105.08", True), ("580.105.08-1.el9", "3:580.105.08-1.el9", True),
    ("535.216.01", "535.216.01", True), ("535.216.01", "535.216.03", False),
])
def test_driver_version_matches(found, wanted, matches):
    assert driver_version_matches(found, wanted) is matches


# --- kernels the next boot may use --------------------------------------------------------------------------

DKMS_3 = "nvidia-current/550.163.01, 6.12.117+deb13-amd64, x86_64: installed\nnvidia-current/550.163.01: added\n"


def test_dkms_status_both_formats():
    assert driver_state.parse_dkms_status(DKMS_3)[0] == {"module": "nvidia-current", "version": "550.163.01",
                                                         "kernel": "6.12.117+deb13-amd64", "state": "installed"}
    old = driver_state.parse_dkms_status("nvidia, 535.54.03, 5.15.0-1-generic, x86_64: installed (WARNING)\n")
    assert old == [{"module": "nvidia", "version": "535.54.03", "kernel": "5.15.0-1-generic", "state": "installed"}]


def _kernel(version, **extra):
    return {"version": version, "running": False, "headers": False, "module": "", "module_version": "",
            "signed": False, **extra}


def test_a_kernel_without_the_module_is_built_for_after_its_headers():
    recorded = {"kernels": [_kernel("6.12.117+deb13-amd64")],
                "dkms": {"present": True, "modules": [{"module": "nvidia-current", "version": "550.163.01",
                                                       "kernel": "", "state": "added"}]}}
    plan = kernel_plan(recorded, "debian", "linux-headers-{kernel}", "550.163.01", True, False)
    assert plan["headers_to_install"] == ["linux-headers-6.12.117+deb13-amd64"]
    assert plan["builds"] == ["6.12.117+deb13-amd64"] and plan["problems"] == []
    assert plan["kernels"][0]["command"] == ("apt-get install linux-headers-6.12.117+deb13-amd64 && "
                                             "dkms autoinstall -k 6.12.117+deb13-amd64")


def test_a_kernel_that_cannot_be_built_for_is_reported_with_the_command():
    recorded = {"kernels": [_kernel("6.12.117+deb13-amd64")], "dkms": {"present": True, "modules": [
        {"module": "nvidia-current", "version": "550.163.01", "kernel": "", "state": "added"}]}}
    plan = kernel_plan(recorded, "debian", "linux-headers-{kernel}", "550.163.01", False, False)
    assert plan["builds"] == [] and plan["headers_to_install"] == []
    assert plan["problems"] == [
        "kernel 6.12.117+deb13-amd64 has no NVIDIA module: booting it leaves the GPUs without a driver; "
        "nvidia_driver_kernel_headers is false. Run: apt-get install linux-headers-6.12.117+deb13-amd64 && "
        "dkms autoinstall -k 6.12.117+deb13-amd64"]


def test_a_built_kernel_passes_and_a_stale_one_is_rebuilt():
    built = _kernel("6.12.117+deb13-amd64", headers=True, signed=True,
                    module="/lib/modules/6.12.117+deb13-amd64/updates/dkms/nvidia-current.ko.xz",
                    module_version="550.163.01")
    recorded = {"kernels": [built], "dkms": {"present": True, "modules": driver_state.parse_dkms_status(DKMS_3)}}
    plan = kernel_plan(recorded, "debian", "linux-headers-{kernel}", "550.163.01", True, False)
    assert [k["status"] for k in plan["kernels"]] == ["ok"] and plan["builds"] == [] and plan["problems"] == []
    newer = kernel_plan(recorded, "debian", "linux-headers-{kernel}", "550.163.02", True, False)
    assert newer["kernels"][0]["status"] == "stale" and newer["builds"] == ["6.12.117+deb13-amd64"]


def test_secure_boot_with_an_unsigned_module_names_the_cause_and_the_mok_steps():
    unsigned = _kernel("6.8.0-49-generic", headers=True, module="/lib/modules/6.8.0-49-generic/updates/dkms/nvidia.ko",
                       module_version="580.95.05")
    plan = kernel_plan({"kernels": [unsigned], "dkms": {}}, "debian", "linux-headers-{kernel}", "580.95.05", True,
                       True)
    assert plan["kernels"][0]["status"] == "unsigned"
    assert plan["problems"][0].startswith("kernel 6.8.0-49-generic: Secure Boot is on and the NVIDIA module "
                                          "/lib/modules/6.8.0-49-generic/updates/dkms/nvidia.ko is not signed")
    assert "mokutil --import /var/lib/dkms/mok.pub" in plan["problems"][0]


def test_the_driver_plan_carries_the_kernels_and_warns():
    observed = {"os": OS["Debian-13"], "gpu": {"gpus": []}, "packages": {
        "installed": "550.163.01-2", "present": ["nvidia-driver=550.163.01-2"], "offered": ["550.163.01-2"]},
        "kernels": {"running": "6.18.44", "kernels": [_kernel("6.12.117+deb13-amd64")],
                    "dkms": {"present": True, "modules": [{"module": "nvidia-current", "version": "550.163.01",
                                                           "kernel": "", "state": "added"}]}}}
    plan = kd.driver_plan({**INPUTS, "kernel_headers": False}, observed)
    assert plan["kernels"]["kernels"][0]["status"] == "missing"
    assert "kernel 6.12.117+deb13-amd64 has no NVIDIA module" in plan["warnings"][-1]
    plan = kd.driver_plan(INPUTS, observed)
    assert plan["headers_missing"] is True and plan["kernels"]["builds"] == ["6.12.117+deb13-amd64"]


class _Node:
    """A stand-in AnsibleModule: modinfo and dkms answer as on a Debian 13 node (the lab's kernel_update case)."""

    def __init__(self, modinfo):
        self.modinfo = modinfo

    def get_bin_path(self, name):
        return f"/usr/sbin/{name}" if name in ("modinfo", "dkms") else None

    def run_command(self, argv, **_):
        command = argv[2]  # host.run bounds every command: ["timeout", seconds, ...]
        if command == "modinfo":
            return 0, self.modinfo, ""
        return 0, DKMS_3, ""


def test_kernels_are_read_from_the_modules_and_boot_folders(tmp_path, monkeypatch):
    modules, boot = tmp_path / "lib-modules", tmp_path / "boot"
    built, fresh, gone = "6.12.117+deb13-amd64", "6.12.118+deb13-amd64", "6.1.0-13-amd64"
    for kernel in (built, fresh):
        (modules / kernel / "kernel").mkdir(parents=True)
        boot.mkdir(exist_ok=True)
        (boot / f"vmlinuz-{kernel}").write_text("")
    (modules / built / "build").mkdir()
    (modules / built / "build" / "Makefile").write_text("")
    (modules / built / "updates" / "dkms").mkdir(parents=True)
    (modules / built / "updates" / "dkms" / "nvidia-current.ko.xz").write_text("")
    (modules / built / "updates" / "dkms" / "nvidia-current-uvm.ko.xz").write_text("")
    # a removed kernel: DKMS left its folder, the kernel's own modules and image are gone
    (modules / gone / "updates" / "dkms").mkdir(parents=True)
    monkeypatch.setattr(driver_state, "MODULES_DIR", str(modules))
    monkeypatch.setattr(driver_state, "BOOT_DIR", str(boot))
    node = _Node("filename: x\nversion:        550.163.01\nlicense:        NVIDIA\nsigner:         DKMS module "
                 "signing key\n")
    found = driver_state.kernels(node)
    assert [k["version"] for k in found["kernels"]] == [built, fresh]
    first, second = found["kernels"]
    assert first["module"].endswith("/updates/dkms/nvidia-current.ko.xz") and first["headers"] is True
    assert (first["module_version"], first["module_flavour"], first["signed"]) == ("550.163.01", "proprietary", True)
    assert (second["module"], second["headers"]) == ("", False)
    assert found["dkms"]["present"] is True and found["dkms"]["modules"][0]["kernel"] == built
    plan = kernel_plan(found, "debian", "linux-headers-{kernel}", "550.163.01", True, False)
    assert [k["status"] for k in plan["kernels"]] == ["ok", "missing"] and plan["builds"] == [fresh]
