"""The /dev/char links of the NVIDIA device nodes (node side).

runc with the systemd cgroup driver grants devices by their /dev/char/<major>:<minor> path. The NVIDIA
device nodes have no such link, so after a `systemctl daemon-reload` systemd applies the device cgroup
again without them and running containers lose their GPUs ("Failed to initialize NVML: Unknown
Error"). NVIDIA's fix, `nvidia-ctk system create-dev-char-symlinks --create-all`, creates these links;
this does the same before anything on the node reloads systemd (NVIDIA container toolkit
troubleshooting, "containers losing access to GPUs with error: Failed to initialize NVML").
"""

import glob
import os
import stat as stat_module

UDEV_RULE = "/lib/udev/rules.d/71-nvidia-dev-char.rules"
UDEV_TEXT = (
    "# Written by kube-gpu-nodes: /dev/char links for the NVIDIA device nodes whenever the driver loads.\n"
    'ACTION=="add", DEVPATH=="/bus/pci/drivers/nvidia", \\\n'
    '  RUN+="/usr/bin/nvidia-ctk system create-dev-char-symlinks --create-all"\n'
)


def nvidia_device_nodes():
    """The NVIDIA character devices: ``[(path, major, minor)]``."""
    found = []
    for path in sorted(glob.glob("/dev/nvidia*") + glob.glob("/dev/nvidia-caps/*")):
        try:
            info = os.stat(path)
        except OSError:
            continue
        if stat_module.S_ISCHR(info.st_mode):
            found.append((path, os.major(info.st_rdev), os.minor(info.st_rdev)))
    return found


def missing_links(devices):
    """The ``(link, target)`` pairs that are not in place yet."""
    missing = []
    for path, major, minor in devices:
        link = f"/dev/char/{major}:{minor}"
        target = os.path.relpath(path, "/dev/char")
        if not (os.path.islink(link) and os.readlink(link) == target):
            missing.append((link, target))
    return missing


def create_links(missing):
    """Create the links (replacing a wrong one)."""
    os.makedirs("/dev/char", exist_ok=True)
    for link, target in missing:
        if os.path.lexists(link):
            os.unlink(link)
        os.symlink(target, link)
