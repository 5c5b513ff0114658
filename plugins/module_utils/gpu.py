"""The one GPU observation: what nvidia-smi, the loaded kernel module and lspci say about a node's GPUs.

Parsers (pure, standard library only, shared by the modules on the node and the unit tests):
  parse_nvidia_smi_xml  ``nvidia-smi -q -x``: driver and CUDA versions; per GPU the product, UUID, memory,
                        MIG mode, MIG devices, processes, persistence mode, compute capability when printed
  parse_query_csv       ``nvidia-smi --query-gpu=index,uuid,compute_cap --format=csv,noheader``: the compute
                        capability of drivers whose XML has no ``<compute_cap>`` (driver 580 has none)
  parse_proc_version    ``/proc/driver/nvidia/version``: the loaded module's version and flavour (open or
                        proprietary: "NVIDIA UNIX Open Kernel Module" against "NVIDIA UNIX x86_64 Kernel Module")
  parse_modinfo         ``modinfo`` of the nvidia module: version, license (open: "Dual MIT/GPL"), signer
  parse_lspci           ``lspci -nn``: NVIDIA GPUs before a driver answers

Node side: ``gather()`` runs them (every command bounded in time) and returns the gpu_facts result that the
gpu_facts, nvidia_driver and nvidia_mig modules and verify share.
"""

import re
import xml.etree.ElementTree as ET

from ansible_collections.kgn.gpu_nodes.plugins.module_utils import host, nvidia

NVIDIA_PCI_VENDOR = "10de"
# PCI classes of GPUs: 0300 VGA compatible controller, 0302 3D controller (datacenter GPUs).
GPU_PCI_CLASSES = ("0300", "0302")
PROC_VERSION = "/proc/driver/nvidia/version"
QUERY_FIELDS = ("index", "uuid", "compute_cap")
# Values nvidia-smi prints for "nothing"; driver 580 also prints this sentence for features it dropped.
_NA = ("N/A", "", "None", "Not Supported", "[N/A]", "Requested functionality has been deprecated")
# The open module's license (open-gpu-kernel-modules, kernel-open/nvidia/nv.c MODULE_LICENSE), and the
# proprietary one's ("NVIDIA").
OPEN_LICENSE = "Dual MIT/GPL"


class GpuParseError(ValueError):
    """Text that is not what nvidia-smi prints."""


def _text(node, path):
    if node is None:
        return None
    found = node.find(path)
    if found is None or found.text is None:
        return None
    value = found.text.strip()
    return None if value in _NA else value


def _mib(value):
    found = re.match(r"^(\d+)\s*MiB$", value or "")
    return int(found.group(1)) if found else None


def _int(value, default):
    return int(value) if value and value.isdigit() else default


def _mig_devices(gpu):
    devices = []
    for dev in gpu.findall("mig_devices/mig_device"):
        devices.append({"index": _int(_text(dev, "index"), len(devices)),
                        "gi": _int(_text(dev, "gpu_instance_id"), -1),
                        "ci": _int(_text(dev, "compute_instance_id"), -1),
                        "memory_total_mib": _mib(_text(dev, "fb_memory_usage/total"))})
    return devices


def parse_nvidia_smi_xml(text):
    """Parse the output of ``nvidia-smi -q -x`` into the gpu_facts result shape."""
    try:
        # nvidia-smi prints a DOCTYPE with a SYSTEM DTD; ElementTree never fetches it.
        root = ET.fromstring((text or "").strip())
    except ET.ParseError as err:
        raise GpuParseError(f"nvidia-smi -q -x output is not XML: {err}") from None
    if root.tag != "nvidia_smi_log":
        raise GpuParseError(f"nvidia-smi -q -x output has root <{root.tag}>, expected <nvidia_smi_log>")
    gpus = []
    for index, gpu in enumerate(root.findall("gpu")):
        devices = _mig_devices(gpu)
        gpus.append({
            "index": index,
            "pci_bus_id": gpu.get("id") or _text(gpu, "pci/pci_bus_id"),
            "product_name": _text(gpu, "product_name"),
            "product_architecture": _text(gpu, "product_architecture"),
            "uuid": _text(gpu, "uuid"),
            "serial": _text(gpu, "serial"),
            "minor_number": _text(gpu, "minor_number"),
            "pci_device_id": _text(gpu, "pci/pci_device_id"),
            "memory_total_mib": _mib(_text(gpu, "fb_memory_usage/total")),
            # Older drivers print <compute_cap>; 580 does not: gather() asks --query-gpu=compute_cap then.
            "compute_capability": _text(gpu, "compute_cap"),
            "compute_capability_source": "nvidia-smi -q -x" if _text(gpu, "compute_cap") else None,
            "mig_mode_current": _text(gpu, "mig_mode/current_mig") or "N/A",
            "mig_mode_pending": _text(gpu, "mig_mode/pending_mig") or "N/A",
            "mig_device_count": len(devices),
            "mig_devices": devices,
            "processes": [{"pid": _int(_text(p, "pid"), 0), "name": _text(p, "process_name") or ""}
                          for p in gpu.findall("processes/process_info")],
            "persistence_mode": _text(gpu, "persistence_mode"),
            "vbios_version": _text(gpu, "vbios_version"),
        })
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


def parse_query_csv(text, fields=QUERY_FIELDS):
    """``nvidia-smi --query-gpu=<fields> --format=csv[,noheader]`` -> one {field: value} per GPU, in GPU order
    ("[N/A]" -> None); the header line of ``--format=csv`` ("name, ..., memory.total [MiB], ...") is skipped."""
    rows = []
    for line in (text or "").splitlines():
        if not line.strip():
            continue
        if not rows and line.split(",")[0].strip() == fields[0]:
            continue
        values = [v.strip() for v in line.split(",")]
        if len(values) != len(fields):
            raise GpuParseError(f"nvidia-smi --query-gpu printed {line!r}, not {len(fields)} values")
        rows.append({f: (None if v in _NA else v) for f, v in zip(fields, values)})
    return rows


def add_compute_capability(facts, rows):
    """Fill each GPU's missing compute capability from parse_query_csv rows (matched by UUID, else index, else
    position)."""
    by_uuid = {r.get("uuid"): r for r in rows if r.get("uuid")}
    by_index = {r.get("index"): r for r in rows if r.get("index") is not None}
    for position, gpu in enumerate(facts.get("gpus") or []):
        if gpu.get("compute_capability"):
            continue
        row = (by_uuid.get(gpu.get("uuid")) or by_index.get(str(gpu.get("index")))
               or (rows[position] if position < len(rows) and not by_index else None))
        if row and row.get("compute_cap"):
            gpu["compute_capability"] = row["compute_cap"]
            gpu["compute_capability_source"] = "nvidia-smi --query-gpu=compute_cap"
    return facts


def add_known_compute_capability(facts):
    """The last source: the compute capability of the product (nvidia.GPU_MODELS), for GPUs nvidia-smi said
    nothing about (lspci only, or a driver without the query)."""
    for gpu in facts.get("gpus") or []:
        if gpu.get("compute_capability") or not gpu.get("product_name"):
            continue
        info = nvidia.nvidia_gpu_info(str(gpu["product_name"]), strict=False)
        if info:
            gpu["compute_capability"] = info["compute_capability"]
            gpu["compute_capability_source"] = "product table ({})".format(info["model"])
    return facts


def parse_proc_version(text):
    """``/proc/driver/nvidia/version`` -> {version, flavour}: flavour "open" for "NVIDIA UNIX Open Kernel Module",
    "proprietary" for "NVIDIA UNIX x86_64 Kernel Module" (or aarch64), "" when the text says neither."""
    found = re.search(r"NVRM version:\s*NVIDIA UNIX\s+(Open\s+)?(?:\S+\s+)?Kernel Module(?:\s+for\s+\S+)?\s+"
                      r"(\d+\.\d+(?:\.\d+)?)", text or "")
    if not found:
        return {"version": "", "flavour": ""}
    return {"version": found.group(2), "flavour": "open" if found.group(1) else "proprietary"}


def parse_modinfo(text):
    """``modinfo <nvidia module>`` -> {filename, version, license, flavour, signer, signed}."""
    fields = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() and key.strip() not in fields:
            fields[key.strip()] = value.strip()
    license_ = fields.get("license", "")
    flavour = ("open" if license_ == OPEN_LICENSE else "proprietary" if license_ == "NVIDIA" else "")
    signer = fields.get("signer", "")
    return {"filename": fields.get("filename", ""), "version": fields.get("version", ""), "license": license_,
            "flavour": flavour, "signer": signer, "signed": bool(signer or fields.get("sig_id"))}


# 00:1e.0 3D controller [0302]: NVIDIA Corporation TU104GL [Tesla T4] [10de:1eb8] (rev a1)
_LSPCI_RE = re.compile(
    r"^(?P<slot>\S+)\s+(?P<class_name>[^\[]+?)\s+\[(?P<class>[0-9a-fA-F]{4})\]:\s+"
    r"(?P<desc>.*?)\s+\[(?P<vendor>[0-9a-fA-F]{4}):(?P<device>[0-9a-fA-F]{4})\]"
)


def parse_lspci(text):
    """NVIDIA GPUs (vendor 10de, class VGA or 3D controller) in ``lspci -nn`` output."""
    found = []
    for line in (text or "").splitlines():
        match = _LSPCI_RE.match(line.strip())
        if not match or match.group("vendor").lower() != NVIDIA_PCI_VENDOR:
            continue
        if match.group("class") not in GPU_PCI_CLASSES:
            continue
        desc = match.group("desc").replace("NVIDIA Corporation", "").strip()
        # lspci names the chip and, in brackets, the marketing name: "TU104GL [Tesla T4]".
        bracket = re.search(r"\[([^\]]+)\]\s*$", desc)
        found.append({
            "index": len(found),
            "pci_bus_id": match.group("slot"),
            "pci_device_id": "{}{}".format(match.group("device").upper(), NVIDIA_PCI_VENDOR.upper()),
            "product_name": bracket.group(1) if bracket else desc,
            "chip": desc.split("[", 1)[0].strip() or None,
        })
    return found


def no_driver_result(reason, lspci_gpus):
    """Result when nvidia-smi cannot answer: GPUs from lspci (if any), never an exception."""
    gpus = []
    for gpu in lspci_gpus or []:
        gpus.append({
            "index": gpu["index"], "pci_bus_id": gpu["pci_bus_id"], "product_name": gpu["product_name"],
            "product_architecture": None, "uuid": None, "serial": None, "minor_number": None,
            "pci_device_id": gpu["pci_device_id"], "memory_total_mib": None, "compute_capability": None,
            "compute_capability_source": None, "mig_mode_current": "N/A", "mig_mode_pending": "N/A",
            "mig_device_count": 0, "mig_devices": [], "processes": [], "persistence_mode": None,
            "vbios_version": None,
        })
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


def first_line(text):
    """The first non-empty line of a command's output (nvidia-smi puts the cause there)."""
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


def kernel_module(proc_text, modinfo_text=""):
    """The loaded module's flavour, as the node says it: {version, flavour, source}. /proc/driver/nvidia/version
    first (the module in memory), then modinfo's license (the module on disk)."""
    proc = parse_proc_version(proc_text)
    if proc["flavour"]:
        return {"version": proc["version"], "flavour": proc["flavour"], "source": PROC_VERSION}
    info = parse_modinfo(modinfo_text)
    if info["flavour"]:
        return {"version": info["version"], "flavour": info["flavour"], "source": "modinfo nvidia"}
    return {"version": proc["version"] or info["version"], "flavour": "", "source": ""}


def read_kernel_module(module):
    """kernel_module() on the node: /proc/driver/nvidia/version, else ``modinfo nvidia`` of the running kernel."""
    proc = host.read(PROC_VERSION) or ""
    modinfo = ""
    if not parse_proc_version(proc)["flavour"] and module.get_bin_path("modinfo"):
        rc, out, _ = host.run(module, ["modinfo", "nvidia"], timeout=20)
        modinfo = out if rc == 0 else ""
    return kernel_module(proc, modinfo)


def gather(module, nvidia_smi="nvidia-smi", lspci="lspci", use_lspci=True):
    """The GPU facts of the node (node side): ``nvidia-smi -q -x`` parsed, the compute capability asked with
    ``--query-gpu`` when the XML lacks it, the kernel module's flavour; or, when the driver does not answer,
    the GPUs ``lspci -nn`` sees with the reason nvidia-smi gave. The one way the project reads GPUs: the
    gpu_facts, nvidia_driver and nvidia_mig modules and verify all call it. Every command is bounded in time:
    nvidia-smi hangs when a GPU has fallen off the bus."""
    smi = module.get_bin_path(nvidia_smi)
    facts = None
    if smi:
        rc, out, err = host.run(module, [smi, "-q", "-x"], timeout=60)
        if rc == 0:
            try:
                facts = parse_nvidia_smi_xml(out)
            except GpuParseError as exc:
                reason = f"nvidia-smi: {exc}"
        else:
            # nvidia-smi prints its diagnosis on stdout ("NVIDIA-SMI has failed because ...").
            reason = "nvidia-smi: {}".format(first_line(out) or first_line(err) or f"exit code {rc}")
    else:
        reason = f"nvidia-smi: {nvidia_smi} not found (no NVIDIA driver utilities installed)"
    if facts is not None:
        if any(not g["compute_capability"] for g in facts["gpus"]):
            rc, out, _ = host.run(module, [smi, "--query-gpu=" + ",".join(QUERY_FIELDS), "--format=csv,noheader"],
                                  timeout=60)
            try:
                add_compute_capability(facts, parse_query_csv(out) if rc == 0 else [])
            except GpuParseError:
                facts["compute_capability_error"] = first_line(out)
    else:
        gpus, problem = None, None
        if not use_lspci:
            problem = "lspci fallback disabled"
        elif not module.get_bin_path(lspci):
            problem = "lspci: not found (install pciutils to detect GPUs before the driver is loaded)"
        else:
            rc, out, err = host.run(module, [module.get_bin_path(lspci), "-nn"], timeout=30)
            if rc != 0:
                problem = "lspci: {}".format(first_line(err or out) or f"exit code {rc}")
            else:
                gpus = parse_lspci(out)
        facts = no_driver_result(f"{reason}; {problem}" if problem else reason, gpus)
    add_known_compute_capability(facts)
    facts["kernel_module"] = read_kernel_module(module)
    return facts
