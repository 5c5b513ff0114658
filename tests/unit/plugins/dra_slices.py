"""ResourceSlices as NVIDIA's DRA kubelet plugin (kubernetes-sigs/dra-driver-nvidia-gpu v0.4.1, commit 764900e7)
publishes them for a node, built from that node's nvidia-smi captures. Test support only: the project never builds
slices, it checks the ones the driver publishes (plugins/module_utils/stacks/dra.py).

How the driver builds them (files of the driver at that commit):
  cmd/gpu-kubelet-plugin/driver.go publishResources: one pool named after the node, one slice holding every
      allocatable device; vendor/k8s.io/dynamic-resource-allocation/resourceslice/resourceslicecontroller.go names it
      <index, 5 hex digits>-<driver>-<owner name>-<random> (owner: the Node, kubeletplugin/draplugin.go) and sets
      pool generation 1 and resourceSliceCount 1 on the first publication.
  cmd/gpu-kubelet-plugin/nvlib.go GetPerGpuAllocatableDevices: a GPU without MIG is one device; a GPU in MIG mode
      is not published itself, each of its MIG devices is.
  cmd/gpu-kubelet-plugin/deviceinfo.go GpuInfo.Attributes/GetDevice: name gpu-<minor>; attributes type "gpu",
      uuid, productName, brand, architecture (strings), cudaComputeCapability, driverVersion, cudaDriverVersion
      (versions, Masterminds semver: 580.159.04 -> 580.159.4, 13.0 -> 13.0.0), addressingMode when NVML reports one,
      resource.kubernetes.io/pciBusID (and pcieRoot, which needs the host's sysfs: not in a capture, left out);
      capacity memory (partitions.go fullGpuCapacity: NVML's total bytes).
  cmd/gpu-kubelet-plugin/mig.go CommonAttributesMig/CommonCapacitiesMig/ToCanonicalName: a MIG device is
      gpu-<parent minor>-mig-<profile without dots, RFC 1123>-<GI profile id>-<placement start>, attributes type
      "mig", parentUUID, profile, uuid and the parent's product, brand, architecture and versions; capacity
      multiprocessors, copyEngines, decoders, encoders, jpegEngines, ofaEngines, memory, plus memorySlice<i> = 1 for
      each memory slice it occupies. Quantities are BinarySI (partitions.go intcap).
  vendor/github.com/NVIDIA/go-nvlib/pkg/nvlib/device/device.go: brand "Nvidia" for NVML_BRAND_NVIDIA (nvidia-smi
      prints "NVIDIA"), PCI bus ID lower case with a 4-digit domain.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.mig import mig

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
H100 = FIXTURES / "nvidia-h100-80gb-hbm3-580"
DRIVER = "gpu.nvidia.com"
PCI_BUS_ID = "resource.kubernetes.io/pciBusID"
# nvidia-smi's product_brand -> go-nvlib GetBrandAsString (device.go)
BRANDS = {"NVIDIA": "Nvidia", "Tesla": "Tesla", "Quadro": "Quadro", "GeForce": "GeForce", "NVIDIA RTX": "NvidiaRTX"}


def quantity(value: int) -> str:
    """Kubernetes' canonical BinarySI form of a whole number (resource.Quantity.String)."""
    if -1024 < value < 1024:
        return str(value)
    suffixes = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
    exponent = 0
    while value % 1024 == 0 and exponent < len(suffixes) - 1:
        value //= 1024
        exponent += 1
    return f"{value}{suffixes[exponent]}"


def semver(text: str) -> str:
    """Masterminds semver's coerced form: missing parts are 0, leading zeros dropped."""
    parts = [int(p) for p in re.match(r"^(\d+)(?:\.(\d+))?(?:\.(\d+))?", text).groups(default="0")]
    return ".".join(str(p) for p in parts)


def gpus_of(xml_text: str, compute_capability: str) -> list[dict]:
    """What NVML tells the driver about each GPU, read from ``nvidia-smi -q -x`` (the capture has no compute
    capability element: the caller gives it, from the CSV query)."""
    root = ET.fromstring(xml_text.strip())
    found = []
    for gpu in root.findall("gpu"):
        bus = gpu.get("id").lower()
        mib = int(re.match(r"^(\d+)", gpu.findtext("fb_memory_usage/total")).group(1))
        mode = (gpu.findtext("addressing_mode") or "").strip()
        found.append({
            "minor": int(gpu.findtext("minor_number")),
            "uuid": gpu.findtext("uuid").strip(),
            "product": gpu.findtext("product_name").strip(),
            "brand": BRANDS[gpu.findtext("product_brand").strip()],
            "architecture": gpu.findtext("product_architecture").strip(),
            "cc": compute_capability,
            "driver": root.findtext("driver_version").strip(),
            "cuda": root.findtext("cuda_version").strip(),
            "pci_bus_id": bus[4:] if re.match(r"^0{4}[0-9a-f]{4}:", bus) else bus,
            "memory_bytes": mib * 1024 * 1024,
            "addressing_mode": mode if mode not in ("", "N/A") else None,
        })
    return found


def mig_profiles(lgip_text: str, lgipp_text: str) -> dict:
    """GPU instance profiles of ``nvidia-smi mig -lgip`` (name, id, SM, decoders, encoders, copy engines, JPEG, OFA,
    memory) with their placements from ``-lgipp``. The memory column is GiB with two decimals; the MiB the driver
    reports is the multiple of 32 MiB nearest to it (9.75 -> 9984, 19.62 -> 20096)."""
    profiles, last = {}, None
    for line in lgip_text.splitlines():
        cells = line.strip().strip("|").split()
        if len(cells) >= 10 and cells[1] == "MIG":
            last = cells[2]
            profiles[last] = {"name": last, "id": int(cells[3]), "sm": int(cells[7]), "dec": int(cells[8]),
                              "enc": int(cells[9]), "mib": round(float(cells[5]) * 1024 / 32) * 32}
        elif len(cells) == 3 and last and all(c.isdigit() for c in cells):
            profiles[last].update(ce=int(cells[0]), jpeg=int(cells[1]), ofa=int(cells[2]))
            last = None
    by_id = {p["id"]: p for p in profiles.values()}
    for placement in mig.parse_lgipp(lgipp_text):
        by_id[placement["id"]].update(starts=placement["starts"], size=placement["size"])
    return profiles


def _attrs(values: dict) -> dict:
    return {key: {kind: value} for key, (kind, value) in values.items()}


def _device(api_version: str, name: str, attributes: dict, capacity: dict) -> dict:
    body = {"attributes": _attrs(attributes),
            "capacity": {k: {"value": quantity(v)} for k, v in capacity.items()}}
    if api_version == "resource.k8s.io/v1beta1":
        return {"name": name, "basic": body}
    return {"name": name, **body}


def _common(gpu: dict) -> dict:
    attrs = {"productName": ("string", gpu["product"]), "brand": ("string", gpu["brand"]),
             "architecture": ("string", gpu["architecture"]), "cudaComputeCapability": ("version", semver(gpu["cc"])),
             "driverVersion": ("version", semver(gpu["driver"])), "cudaDriverVersion": ("version", semver(gpu["cuda"])),
             PCI_BUS_ID: ("string", gpu["pci_bus_id"])}
    if gpu["addressing_mode"]:
        attrs["addressingMode"] = ("string", gpu["addressing_mode"])
    return attrs


def devices(api_version: str, gpu: dict, mig_layout: list | None = None, profiles: dict | None = None) -> list:
    """The devices of one GPU: the GPU itself, or (``mig_layout``: the profiles of its MIG devices, placed the way
    the driver places them when the nvidia_mig role creates them in order) one per MIG device."""
    if not mig_layout:
        attrs = dict(_common(gpu), type=("string", "gpu"), uuid=("string", gpu["uuid"]))
        return [_device(api_version, f"gpu-{gpu['minor']}", attrs, {"memory": gpu["memory_bytes"]})]
    model = mig.model_of(gpu["product"], gpu["memory_bytes"] // 2**20)
    order = mig.creation_order(model, list(mig_layout))
    starts = mig._first_free(model, order)
    found = []
    for index, (name, start) in enumerate(zip(order, starts, strict=True)):
        p = profiles[name]
        pname = re.sub(r"[^a-z0-9-.]", "-", name.replace(".", "").lower()).strip("-")
        attrs = dict(_common(gpu), type=("string", "mig"), parentUUID=("string", gpu["uuid"]),
                     profile=("string", name), uuid=("string", f"MIG-00000000-0000-0000-0000-{index:012d}"))
        capacity = {"multiprocessors": p["sm"], "copyEngines": p["ce"], "decoders": p["dec"], "encoders": p["enc"],
                    "jpegEngines": p["jpeg"], "ofaEngines": p["ofa"], "memory": p["mib"] * 2**20}
        capacity.update({f"memorySlice{i}": 1 for i in range(start, start + p["size"])})
        found.append(_device(api_version, f"gpu-{gpu['minor']}-mig-{pname}-{p['id']}-{start}", attrs, capacity))
    return found


def resource_slice(node: str, api_version: str, device_list: list, generation: int = 1, count: int = 1,
                   index: int = 0, suffix: str = "x7k9m") -> dict:
    """One ResourceSlice of the node's pool, named and owned the way the resourceslice controller creates it."""
    return {
        "apiVersion": api_version, "kind": "ResourceSlice",
        "metadata": {"name": f"{index:05x}-{DRIVER}-{node}-{suffix}", "generateName": f"{index:05x}-{DRIVER}-{node}-",
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node,
                                          "uid": "00000000-0000-0000-0000-000000000001", "controller": True}]},
        "spec": {"driver": DRIVER, "pool": {"name": node, "generation": generation, "resourceSliceCount": count},
                 "nodeName": node, "devices": device_list},
    }


def h100(api_version: str = "resource.k8s.io/v1", node: str = "h100-node", mig_layout: list | None = None) -> dict:
    """The slice the kubelet plugin publishes on the captured H100 node (MIG off, or with ``mig_layout`` applied)."""
    gpu = gpus_of((H100 / "nvidia-smi-q-x.xml").read_text(), "9.0")[0]
    profiles = mig_profiles((H100 / "mig-lgip.txt").read_text(), (H100 / "mig-lgipp.txt").read_text())
    return resource_slice(node, api_version, devices(api_version, gpu, mig_layout, profiles))
