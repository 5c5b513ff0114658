"""Checks of a GPU node's GPUs and driver: the GPUs on the PCI bus, the driver package at its pin, the kernel module,
nvidia-smi, and the MIG layout (plugins/module_utils/verify/checks.py says how a check is written)."""

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.nvidia import driver_version_matches
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.verify.checks import (
    GPU_NODE,
    NO_GPU,
    NOT_READ,
    cause,
    check,
    failed,
    ok,
    skipped,
    warn,
)

DRIVER_GUIDE = "NVIDIA driver installation guide, https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/"
DRIVER = ("nvidia_driver",)


GPU_PRESENT_CAUSES = [
    cause("no_gpu_expected", status="warn",
          cause=("no NVIDIA GPU present on this node (expected here; gpu_node_verify_expect_gpu is "
                 "false)"),
          fix=("nothing to do on a lab or CI node; GPU checks (driver loaded, nvidia-smi, device "
               "plugin, allocatable) are skipped"),
          source="lab"),
    cause("no_gpu", status="failed",
          cause=("no NVIDIA GPU present on this node: no PCI device with vendor 0x10de is visible (GPU"
                 " not passed through to the VM, fallen off the bus, or this host is not a GPU node)"),
          fix=("check `lspci -nn | grep -i nvidia` and `dmesg | grep -i NVRM` (\"GPU has fallen off the"
               " bus\" needs a power cycle); for a VM attach the GPU by PCI passthrough; if the host "
               "has no GPU remove it from gpu_nodes"),
          source=DRIVER_GUIDE),
]


@check("gpu_present", "NVIDIA GPU on the PCI bus", kinds=(GPU_NODE,), causes=GPU_PRESENT_CAUSES)
def gpu_present(seen, want, done):
    gpu = seen.get("gpu") or {}
    devices = gpu.get("pci_devices") or []
    if gpu.get("present"):
        return ok(f"{len(devices) or len((gpu.get('smi') or {}).get('gpus') or [])} NVIDIA GPU(s) on the PCI bus",
                  count=len(devices))
    expect = bool(want.get("expect_gpu", True))
    if not gpu.get("read", True):
        return skipped(NOT_READ)
    return (failed if expect else warn)(NO_GPU, count=0, expect_gpu=expect)


DRIVER_PACKAGE_CAUSES = [
    cause("driver_not_installed", when={"installed": None},
          cause="the NVIDIA driver package is not installed",
          fix=("run `ansible-playbook site.yml --limit <host>` (or playbooks/nvidia_driver.yml) to "
               "install the pinned driver"),
          source=DRIVER_GUIDE),
    cause("driver_version_drift", when={"installed": {"nonempty": True}},
          cause=("the installed driver {installed} is not the pinned {pinned}: an unattended upgrade "
                 "or a manual apt/dnf run replaced it (the package was not held)"),
          fix=("re-run playbooks/nvidia_driver.yml to install {pinned} again and hold it (`apt-mark "
               "showhold` must list the driver packages), then reboot so the kernel module matches the"
               " libraries"),
          source=("https://github.com/kubernetes-sigs/kubespray/issues/8540 (hold the driver against "
                  "unattended upgrades); NVIDIA driver installation guide, "
                  "https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/")),
]


@check("driver_package", "driver package at the pinned version", kinds=(GPU_NODE,), concerns=DRIVER,
       causes=DRIVER_PACKAGE_CAUSES)
def driver_package(seen, want, done):
    gpu = seen.get("gpu") or {}
    pinned = want.get("driver_version") or ""
    package = gpu.get("package_version")
    adopted = gpu.get("adopted") or {}
    if adopted:
        found = adopted.get("version") or "version unknown"
        where = adopted.get("library") or adopted.get("nvidia_smi") or "the loaded kernel module"
        fits = not pinned or driver_version_matches(found, pinned)
        return (ok if fits else failed)(
            f"adopted: driver {found} ({where}), installed outside the packages and kept; the packages that would "
            "replace it are blocked" + ("" if fits else f"; pinned {pinned}"),
            installed=found, pinned=pinned or None, adopted=True)
    if not pinned:
        return skipped("skipped: no pinned driver version given", installed=package)
    if not gpu.get("state_read", True):
        return skipped("skipped: the driver play recorded no state on this host in this run", pinned=pinned)
    if not package:
        return failed(f"no NVIDIA driver package installed (pinned {pinned})", installed=None, pinned=pinned,
                      package=gpu.get("package_name"))
    if driver_version_matches(package, pinned):
        return ok(f"{gpu.get('package_name') or 'driver'} {package} installed", installed=package, pinned=pinned)
    return failed(f"installed {package}, pinned {pinned}", installed=package, pinned=pinned,
                  package=gpu.get("package_name"))


DRIVER_SUPPORT_CAUSES = [
    cause("support_ending", status="warn",
          cause="{warnings}",
          fix=("move the node to a supported OS release or driver branch (docs/driver-branches.md has the table); "
               "install the named kernel's headers so DKMS builds the module before that kernel boots"),
          source=("NVIDIA, Supported Drivers and CUDA Toolkit Versions, https://docs.nvidia.com/datacenter/tesla/drivers/"
                  "supported-drivers-and-cuda-toolkit-versions.html")),
]


@check("driver_support", "OS, driver branch and kernels supported", kinds=(GPU_NODE,), concerns=DRIVER,
       causes=DRIVER_SUPPORT_CAUSES)
def driver_support(seen, want, done):
    """What the driver plan warned of on this run: it works today, but not for long (end of life) or not after the
    next reboot (a kernel without the module)."""
    gpu = seen.get("gpu") or {}
    if not gpu.get("state_read", True):
        return None
    said = gpu.get("support_warnings") or []
    if said:
        return warn("; ".join(said), warnings="; ".join(said))
    return ok("OS release, driver branch and installed kernels are supported")


def _no_gpu(gpu):
    return NO_GPU if gpu.get("read", True) else NOT_READ


def _module_evidence(gpu):
    modules = gpu.get("modules") or {}
    return {"nouveau_loaded": bool(modules.get("nouveau")), "nvidia_module_loaded": bool(modules.get("nvidia")),
            "secure_boot": gpu.get("secure_boot"), "kernel_driver_version": gpu.get("kernel_driver_version"),
            "installed": gpu.get("package_version")}


DRIVER_LOADED_CAUSES = [
    cause("nouveau_loaded", when={"nouveau_loaded": True},
          cause=("the nouveau module is loaded and holds the GPU, so the nvidia module cannot bind to "
                 "it"),
          fix=("blacklist nouveau (/etc/modprobe.d/blacklist-nouveau.conf: `blacklist nouveau` + "
               "`options nouveau modeset=0`, written by the nvidia_driver role), run `update-initramfs"
               " -u` (dracut -f on RHEL) and reboot"),
          source=("NVIDIA driver installation guide, "
                  "https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/ (disabling "
                  "nouveau)")),
    cause("secure_boot_blocks_module", when={"secure_boot": True, "nouveau_loaded": False},
          cause=("Secure Boot is enabled and the nvidia module is not loaded: an unsigned (DKMS-built)"
                 " module is refused (\"modprobe: ERROR: could not insert 'nvidia': Key was rejected by"
                 " service\")"),
          fix=("enroll the DKMS signing key (`mokutil --import /var/lib/dkms/mok.pub`, confirm at the "
               "next boot), use the distribution's signed precompiled driver, or disable Secure Boot "
               "in the firmware"),
          source=("NVIDIA driver installation guide, "
                  "https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/ (Secure Boot)")),
    cause("module_not_built",
          when={"secure_boot": {"not": True}, "nouveau_loaded": False, "installed": {"nonempty": True}},
          cause=("the driver {installed} is installed but its kernel module is not loaded: the DKMS "
                 "build failed for the running kernel (missing linux-headers) or the node was not "
                 "rebooted after the install"),
          fix=("check `dkms status` and `modprobe nvidia`; install the headers for `uname -r`, "
               "rebuild, and reboot"),
          source=DRIVER_GUIDE),
    cause("module_missing", fallback=True,
          cause="the nvidia kernel module is not loaded and no driver package is installed",
          fix="run playbooks/nvidia_driver.yml for this host",
          source=DRIVER_GUIDE),
]


@check("driver_loaded", "NVIDIA kernel module loaded", kinds=(GPU_NODE,), concerns=DRIVER,
       causes=DRIVER_LOADED_CAUSES)
def driver_loaded(seen, want, done):
    gpu = seen.get("gpu") or {}
    evidence = _module_evidence(gpu)
    if not gpu.get("present"):
        return skipped(_no_gpu(gpu), **evidence)
    version = gpu.get("kernel_driver_version")
    if version or evidence["nvidia_module_loaded"]:
        return ok(f"kernel module loaded ({version or 'version unknown'})", **evidence)
    return failed("the nvidia kernel module is not loaded", **evidence)


NVIDIA_SMI_CAUSES = [
    cause("nvml_version_mismatch", when={"smi_error": {"regex": "(?i)version mismatch"}},
          cause=("\"Failed to initialize NVML: Driver/library version mismatch\": the user-space "
                 "libraries were upgraded ({installed}) while the old kernel module "
                 "({kernel_driver_version}) is still loaded, typically after an unattended upgrade"),
          fix=("reboot the node (or drain it and reload the nvidia modules), then hold the driver "
               "packages so it cannot recur: the nvidia_driver role pins and holds them (apt-mark hold"
               " / dnf versionlock)"),
          source=("https://github.com/kubernetes-sigs/kubespray/issues/8540 (driver/library mismatch "
                  "after an unattended upgrade); NVIDIA driver installation guide, "
                  "https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/")),
    cause("smi_no_driver",
          when={"smi_error": {"regex": "(?i)couldn't communicate with the NVIDIA driver|no devices were found"}},
          cause="nvidia-smi cannot talk to the kernel driver because the nvidia module is not loaded",
          fix=("fix the \"NVIDIA kernel module loaded\" check first (nouveau, Secure Boot, DKMS build), "
               "then reboot"),
          source=DRIVER_GUIDE),
    cause("nvml_missing",
          when={"smi_error": {"regex": "(?i)could not load NVML|NVML Shared Library Not Found|libnvidia-ml"}},
          cause="the NVML library (libnvidia-ml.so.1) is missing or does not match the driver",
          fix=("reinstall the driver's user-space libraries (Debian nvidia-driver-libs / "
               "libnvidia-ml1) at the pinned version"),
          source=("docs/field-notes.md, CentOS 7.9 + Docker 18.09 + Kubernetes 1.16 (could not load "
                  "NVML library); NVIDIA driver installation guide, "
                  "https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/")),
    cause("smi_not_installed", when={"smi_found": False},
          cause="nvidia-smi is not installed, so the driver cannot be verified",
          fix="install the nvidia-smi package of the pinned driver (playbooks/nvidia_driver.yml)",
          source=DRIVER_GUIDE),
    cause("smi_version_drift", when={"smi_driver_version": {"nonempty": True}},
          cause=("nvidia-smi reports driver {smi_driver_version}, not the pinned {pinned} (upgraded, "
                 "or installed by a runfile)"),
          fix="re-run playbooks/nvidia_driver.yml to install and hold {pinned}, then reboot",
          source=DRIVER_GUIDE),
    cause("smi_other", fallback=True,
          cause="nvidia-smi failed: {summary}",
          fix="run `nvidia-smi -q` on the node and check `dmesg | grep -i NVRM`",
          source=DRIVER_GUIDE),
]


@check("nvidia_smi", "nvidia-smi answers with the pinned version", kinds=(GPU_NODE,), concerns=DRIVER,
       causes=NVIDIA_SMI_CAUSES)
def nvidia_smi(seen, want, done):
    gpu = seen.get("gpu") or {}
    smi = gpu.get("smi") or {}
    pinned = want.get("driver_version") or ""
    if not gpu.get("present"):
        return skipped(_no_gpu(gpu), smi_error=smi.get("error") or "")
    evidence = {"smi_found": bool(smi.get("found")), "smi_error": smi.get("error") or "", "smi_driver_version": "",
                "pinned": pinned, "kernel_driver_version": gpu.get("kernel_driver_version"),
                "installed": gpu.get("package_version"),
                "nouveau_loaded": bool((gpu.get("modules") or {}).get("nouveau"))}
    gpus = smi.get("gpus") or []
    if not smi.get("found"):
        return failed("nvidia-smi is not installed", **evidence)
    if smi.get("rc") != 0 or not gpus:
        first = (smi.get("error") or "no output").strip().splitlines()
        return failed(f"nvidia-smi failed: {first[0] if first else ''}", **evidence)
    evidence["smi_driver_version"] = gpus[0].get("driver_version") or ""
    if driver_version_matches(evidence["smi_driver_version"], pinned):
        return ok(f"driver {evidence['smi_driver_version']}, {len(gpus)} GPU(s)", **evidence)
    return failed(f"nvidia-smi reports driver {evidence['smi_driver_version']}, pinned {pinned}", **evidence)


MIG_LAYOUT_CAUSES = [
    cause("mig_not_applied", when={"recorded_layout": None},
          cause=("the nvidia_mig play has not recorded this node's MIG layout (it did not run, or "
                 "failed before reading)"),
          fix=("run `ansible-playbook playbooks/nvidia_mig.yml --limit <host>` (site.yml runs it after"
               " the driver)"),
          source="docs/mig.md"),
    cause("mig_layout_drift", fallback=True,
          cause=("the GPUs do not show the MIG layout the inventory asks for (changed by hand, by "
                 "another tool such as the GPU Operator's MIG manager, a MIG mode change still "
                 "pending, or nvidia_mig_layout changed since the last run)"),
          fix=("run `ansible-playbook playbooks/nvidia_mig.yml --limit <host>`; a mode that stays "
               "pending after the GPU reset needs a reboot; compare `nvidia-smi mig -lgi` with "
               "nvidia_mig_layout"),
          source="NVIDIA MIG user guide, https://docs.nvidia.com/datacenter/tesla/mig-user-guide/"),
]


@check("mig_layout", "MIG mode and layout of each GPU as the inventory asks", kinds=(GPU_NODE,),
       concerns=("nvidia_mig",), causes=MIG_LAYOUT_CAUSES)
def mig_layout(seen, want, done):
    """The live MIG layout per GPU (recorded by the nvidia_mig module) against nvidia_mig_layout; no line when MIG
    is not managed."""
    wanted = want.get("mig_layout")
    if wanted in ("", None):
        return None
    found = seen.get("mig") or {}
    gpus = found.get("gpus") or []
    evidence = {"layout": wanted, "recorded_layout": found.get("layout"), "gpus": gpus,
                "problems": found.get("problems") or []}
    if not found.get("recorded"):
        return failed("no recorded MIG state: the nvidia_mig play did not run on this host", **evidence)
    if found.get("layout") != wanted:
        return failed(f"the MIG layout was last applied for {found.get('layout')!r}, the inventory asks for "
                      f"{wanted!r}", **evidence)
    if evidence["problems"]:
        return failed("; ".join(evidence["problems"]), **evidence)
    return ok("; ".join(f"GPU {g['index']}: {g['layout']}" for g in gpus) or "no GPU", **evidence)

