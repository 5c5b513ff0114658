"""Every kernel the next boot may use must have the NVIDIA module of the installed driver.

Pure functions over plain data (Python 3.6 grammar: they run on the nodes inside the nvidia_driver module).
What the node shows comes from driver_state.kernels(): each installed kernel (modules in /lib/modules/<k>/kernel
and a boot image, or running now), whether its headers are there (/lib/modules/<k>/build/Makefile), the NVIDIA
module under /lib/modules/<k> (DKMS's updates/dkms, Ubuntu's precompiled linux-modules-nvidia-*, EL's
extra/) with modinfo's version, license and signature, and ``dkms status``.

After a kernel update the new kernel is installed but not booted: unless DKMS built the module for it (its
headers were there) or the distribution's precompiled module package for it is installed, the next boot has
no GPU. ``kernel_plan`` says, per kernel: fine, headers to install, a DKMS build to run (``dkms autoinstall
-k <kernel>``), or a problem with the exact commands, and names Secure Boot with an unsigned module as the
cause, with the MOK steps.
"""

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.nvidia import driver_version_matches

MOK_STEPS = ("enrol the key DKMS signs with: mokutil --import /var/lib/dkms/mok.pub (choose a one-time password), "
             "reboot, choose \"Enroll MOK\" in the MOK manager and enter the password; then rebuild: dkms autoinstall "
             "-k {kernel}")


def _install(family, package):
    return (f"apt-get install {package}" if family == "debian" else f"dnf install {package}")


def kernel_plan(recorded, family, headers_package, driver_version, wanted_headers, secure_boot, manage=True):
    """Per kernel the next boot may use: {version, running, headers, headers_package, module, module_version,
    status, action, command, problem}; and what the run does: headers to install, kernels to build for, problems.

    ``recorded``: driver_state.kernels() (None when not recorded: a render; nothing is then planned).
    ``headers_package``: the platform's pattern ('linux-headers-{kernel}'). ``driver_version``: the upstream
    version the module must have ("" before the first install: then only the headers are planned).
    ``wanted_headers``: nvidia_driver_kernel_headers. ``manage``: False for an adopted driver (report only)."""
    result = {"recorded": recorded is not None, "kernels": [], "headers_to_install": [], "builds": [],
              "problems": []}
    if recorded is None:
        return result
    dkms = recorded.get("dkms") or {}
    dkms_source = any(m.get("state") in ("added", "built", "installed") for m in dkms.get("modules") or [])
    for kernel in recorded.get("kernels") or []:
        version = kernel["version"]
        package = headers_package.replace("{kernel}", version)
        row = {"version": version, "running": bool(kernel.get("running")), "headers": bool(kernel.get("headers")),
               "headers_package": package, "module": kernel.get("module") or "",
               "module_version": kernel.get("module_version") or "", "signed": bool(kernel.get("signed")),
               "status": "ok", "action": "", "command": "", "problem": ""}
        if not row["headers"] and wanted_headers and manage:
            result["headers_to_install"].append(package)
        build = f"dkms autoinstall -k {version}"
        if not driver_version:
            row["status"] = "no driver yet"
        elif not row["module"] or not driver_version_matches(row["module_version"] or "", driver_version):
            row["status"] = "missing" if not row["module"] else "stale"
            what = ("has no NVIDIA module" if not row["module"] else
                    "has the NVIDIA module {} (the driver is {})".format(row["module_version"] or "of unknown version",
                                                                        driver_version))
            steps = ([] if row["headers"] else [_install(family, package)]) + [build]
            row["command"] = " && ".join(steps)
            can_build = manage and dkms.get("present") and dkms_source and (row["headers"] or wanted_headers)
            if can_build:
                row["action"] = "build"
                result["builds"].append(version)
            else:
                why = ("the driver was installed outside the packages (adopted)" if not manage else
                       "no DKMS source of the driver is registered (dkms status)" if not (dkms.get("present")
                                                                                         and dkms_source) else
                       "nvidia_driver_kernel_headers is false")
                row["action"] = "report"
                row["problem"] = ("kernel {} {}: booting it leaves the GPUs without a driver; {}. Run: {}"
                                  .format(version, what, why, row["command"]))
                result["problems"].append(row["problem"])
        elif secure_boot and not row["signed"]:
            row["status"] = "unsigned"
            row["action"] = "report"
            row["problem"] = ("kernel {}: Secure Boot is on and the NVIDIA module {} is not signed, so it will not "
                              "load; {}".format(version, row["module"], MOK_STEPS.format(kernel=version)))
            result["problems"].append(row["problem"])
        result["kernels"].append(row)
    return result
