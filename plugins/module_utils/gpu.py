"""Parsers behind the gpu_facts module: ``nvidia-smi -q -x`` XML and ``lspci -nn`` text.

Pure Python (standard library only) so the module on the node and the unit tests on the controller
share it. Every function returns plain dicts/lists/str/int/bool/None.
"""

import re
import xml.etree.ElementTree as ET

from ansible_collections.kgn.gpu_nodes.plugins.module_utils import host

NVIDIA_PCI_VENDOR = "10de"
# PCI classes of GPUs: 0300 VGA compatible controller, 0302 3D controller (datacenter GPUs).
GPU_PCI_CLASSES = ("0300", "0302")
_NA = ("N/A", "", "None", "Not Supported", "[N/A]")


class GpuParseError(ValueError):
    """Text that is not what nvidia-smi -q -x prints."""


def _text(node: "ET.Element | None", path: str) -> "str | None":
    if node is None:
        return None
    found = node.find(path)
    if found is None or found.text is None:
        return None
    value = found.text.strip()
    return None if value in _NA else value


def _mib(value: "str | None") -> "int | None":
    if not value:
        return None
    match = re.match(r"^(\d+)\s*MiB$", value)
    return int(match.group(1)) if match else None


def parse_nvidia_smi_xml(text: str) -> dict:
    """Parse the output of ``nvidia-smi -q -x`` into the gpu_facts result shape."""
    try:
        # nvidia-smi prints a DOCTYPE with a SYSTEM DTD; ElementTree never fetches it.
        root = ET.fromstring(text.strip())
    except ET.ParseError as err:
        raise GpuParseError(f"nvidia-smi -q -x output is not XML: {err}") from None
    if root.tag != "nvidia_smi_log":
        raise GpuParseError(f"nvidia-smi -q -x output has root <{root.tag}>, expected <nvidia_smi_log>")
    gpus = []
    for index, gpu in enumerate(root.findall("gpu")):
        mig_devices = gpu.findall("mig_devices/mig_device")
        gpus.append(
            {
                "index": index,
                "pci_bus_id": gpu.get("id") or _text(gpu, "pci/pci_bus_id"),
                "product_name": _text(gpu, "product_name"),
                "product_architecture": _text(gpu, "product_architecture"),
                "uuid": _text(gpu, "uuid"),
                "serial": _text(gpu, "serial"),
                "minor_number": _text(gpu, "minor_number"),
                "pci_device_id": _text(gpu, "pci/pci_device_id"),
                "memory_total_mib": _mib(_text(gpu, "fb_memory_usage/total")),
                # Newer drivers print <compute_cap>; older ones do not: then the filter
                # nvidia_gpu_info derives it from the product name.
                "compute_capability": _text(gpu, "compute_cap"),
                "mig_mode_current": _text(gpu, "mig_mode/current_mig") or "N/A",
                "mig_mode_pending": _text(gpu, "mig_mode/pending_mig") or "N/A",
                "mig_device_count": len(mig_devices),
                "persistence_mode": _text(gpu, "persistence_mode"),
                "vbios_version": _text(gpu, "vbios_version"),
            }
        )
    attached = _text(root, "attached_gpus")
    return {
        "gpu_present": bool(gpus),
        "driver_loaded": True,
        "source": "nvidia-smi",
        "driver_version": _text(root, "driver_version"),
        "cuda_version": _text(root, "cuda_version"),
        "attached_gpus": int(attached) if attached and attached.isdigit() else len(gpus),
        "gpu_count": len(gpus),
        "gpus": gpus,
        "reason": None,
    }


# 00:1e.0 3D controller [0302]: NVIDIA Corporation TU104GL [Tesla T4] [10de:1eb8] (rev a1)
_LSPCI_RE = re.compile(
    r"^(?P<slot>\S+)\s+(?P<class_name>[^\[]+?)\s+\[(?P<class>[0-9a-fA-F]{4})\]:\s+"
    r"(?P<desc>.*?)\s+\[(?P<vendor>[0-9a-fA-F]{4}):(?P<device>[0-9a-fA-F]{4})\]"
)


def parse_lspci(text: str) -> "list[dict]":
    """NVIDIA GPUs (vendor 10de, class VGA or 3D controller) in ``lspci -nn`` output."""
    found = []
    for line in text.splitlines():
        match = _LSPCI_RE.match(line.strip())
        if not match or match["vendor"].lower() != NVIDIA_PCI_VENDOR or match["class"] not in GPU_PCI_CLASSES:
            continue
        desc = match["desc"].replace("NVIDIA Corporation", "").strip()
        # lspci names the chip and, in brackets, the marketing name: "TU104GL [Tesla T4]".
        bracket = re.search(r"\[([^\]]+)\]\s*$", desc)
        found.append(
            {
                "index": len(found),
                "pci_bus_id": match["slot"],
                "pci_device_id": f"{match['device'].upper()}{NVIDIA_PCI_VENDOR.upper()}",
                "product_name": bracket.group(1) if bracket else desc,
                "chip": desc.split("[", 1)[0].strip() or None,
            }
        )
    return found


def no_driver_result(reason: str, lspci_gpus: "list[dict] | None") -> dict:
    """Result when nvidia-smi cannot answer: GPUs from lspci (if any), never an exception."""
    gpus = []
    for gpu in lspci_gpus or []:
        gpus.append(
            {
                "index": gpu["index"],
                "pci_bus_id": gpu["pci_bus_id"],
                "product_name": gpu["product_name"],
                "product_architecture": None,
                "uuid": None,
                "serial": None,
                "minor_number": None,
                "pci_device_id": gpu["pci_device_id"],
                "memory_total_mib": None,
                "compute_capability": None,
                "mig_mode_current": "N/A",
                "mig_mode_pending": "N/A",
                "mig_device_count": 0,
                "persistence_mode": None,
                "vbios_version": None,
            }
        )
    return {
        "gpu_present": bool(gpus),
        "driver_loaded": False,
        "source": "lspci" if lspci_gpus is not None else "none",
        "driver_version": None,
        "cuda_version": None,
        "attached_gpus": len(gpus),
        "gpu_count": len(gpus),
        "gpus": gpus,
        "reason": reason,
    }


def first_line(text: str) -> str:
    """The first non-empty line of a command's output (nvidia-smi puts the cause there)."""
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


def gather(module, nvidia_smi="nvidia-smi", lspci="lspci", use_lspci=True):
    """The GPU facts of the node (node side): ``nvidia-smi -q -x`` parsed, or, when the driver does not
    answer, the GPUs ``lspci -nn`` sees with the reason nvidia-smi gave. The one way the project reads
    GPUs: the gpu_facts module, the driver module and verify all call it. Both commands are bounded in time:
    nvidia-smi hangs when a GPU has fallen off the bus."""
    smi = module.get_bin_path(nvidia_smi)
    if smi:
        rc, out, err = host.run(module, [smi, "-q", "-x"], timeout=60)
        if rc == 0:
            try:
                return parse_nvidia_smi_xml(out)
            except GpuParseError as exc:
                reason = f"nvidia-smi: {exc}"
        else:
            # nvidia-smi prints its diagnosis on stdout ("NVIDIA-SMI has failed because ...").
            reason = f"nvidia-smi: {first_line(out) or first_line(err) or f'exit code {rc}'}"
    else:
        reason = f"nvidia-smi: {nvidia_smi} not found (no NVIDIA driver utilities installed)"
    gpus, problem = None, None
    if not use_lspci:
        problem = "lspci fallback disabled"
    elif not module.get_bin_path(lspci):
        problem = "lspci: not found (install pciutils to detect GPUs before the driver is loaded)"
    else:
        rc, out, err = host.run(module, [module.get_bin_path(lspci), "-nn"], timeout=30)
        if rc != 0:
            problem = f"lspci: {first_line(err or out) or f'exit code {rc}'}"
        else:
            gpus = parse_lspci(out)
    return no_driver_result(f"{reason}; {problem}" if problem else reason, gpus)
