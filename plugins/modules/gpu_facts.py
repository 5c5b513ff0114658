#!/usr/bin/python
"""gpu_facts: NVIDIA GPU facts from nvidia-smi -q -x, with lspci as the fallback."""

DOCUMENTATION = r"""
---
module: gpu_facts
short_description: Gather NVIDIA GPU facts from nvidia-smi (or lspci when the driver is not loaded)
version_added: "1.0.0"
description:
  - Runs C(nvidia-smi -q -x) and returns the GPU count, product names, UUIDs, memory (MiB), driver and
    CUDA versions, compute capability, MIG mode (current and pending), MIG devices, processes and
    persistence mode of every GPU.
  - The compute capability comes from whichever source the driver offers - the XML's C(compute_cap) element,
    else C(nvidia-smi --query-gpu=compute_cap) (driver 580 prints no such element), else the product's row
    in the project's GPU table - and each GPU says which in C(compute_capability_source).
  - Also returns the loaded kernel module's flavour as the node shows it (C(/proc/driver/nvidia/version),
    else C(modinfo nvidia)), and the installed driver, read as the nvidia_driver module reads it - its
    version from the loaded module, the NVML library or the packages, and who owns it.
  - When nvidia-smi is missing or fails (no driver, module not loaded, no GPU), it looks for NVIDIA
    devices (PCI vendor 10de, class VGA or 3D controller) in C(lspci -nn) and returns a structured
    answer with O(driver_loaded=false) and the reason, never a traceback.
  - Read-only; supports check mode.
options:
  nvidia_smi_path:
    description: nvidia-smi binary (name on PATH or absolute path).
    type: str
    default: nvidia-smi
  lspci_path:
    description: lspci binary (name on PATH or absolute path).
    type: str
    default: lspci
  use_lspci:
    description: Fall back to lspci when nvidia-smi cannot answer.
    type: bool
    default: true
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
author:
  - kube-gpu-nodes
"""

EXAMPLES = r"""
- name: Gather GPU facts
  gpu_facts:
  register: __nvidia_driver_gpu

- name: Show what the node has
  ansible.builtin.debug:
    msg: "{{ __nvidia_driver_gpu.gpu_count }} x {{ __nvidia_driver_gpu.gpus | map(attribute='product_name') | list }}"
"""

RETURN = r"""
gpu_present:
  description: Whether at least one NVIDIA GPU was found (by nvidia-smi or lspci).
  returned: always
  type: bool
driver_loaded:
  description: Whether nvidia-smi could talk to the NVIDIA kernel driver.
  returned: always
  type: bool
source:
  description: Where the GPU list came from, V(nvidia-smi), V(lspci) or V(none).
  returned: always
  type: str
reason:
  description: Why nvidia-smi could not answer (its first output line, or "not found"); null when it answered.
  returned: always
  type: str
  sample: "nvidia-smi: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
driver_version:
  description: Driver version reported by nvidia-smi.
  returned: always
  type: str
  sample: "535.104.05"
cuda_version:
  description: Highest CUDA version the driver supports, as nvidia-smi reports it.
  returned: always
  type: str
  sample: "12.2"
gpu_count:
  description: Number of GPUs in the answer.
  returned: always
  type: int
attached_gpus:
  description: Number of GPUs nvidia-smi says are attached.
  returned: always
  type: int
kernel_module:
  description: The loaded NVIDIA kernel module as the node shows it.
  returned: always
  type: dict
  contains:
    version: {description: "Its version (empty when none is loaded and modinfo finds none).", type: str}
    flavour: {description: "V(open), V(proprietary), or empty when the node does not say.", type: str}
    source: {description: "Where the flavour was read: C(/proc/driver/nvidia/version) or C(modinfo nvidia).", type: str}
installed_driver:
  description: The installed driver (present, version, kernel_module_version, kernel_module, nvidia_smi, library,
    package_version, owner, owned, packages), read as the nvidia_driver module reads it.
  returned: always
  type: dict
gpus:
  description: One entry per GPU.
  returned: always
  type: list
  elements: dict
  contains:
    index: {description: Position in the answer., type: int}
    product_name: {description: Product name, for example V(Tesla T4)., type: str}
    uuid: {description: GPU UUID (null from lspci)., type: str}
    memory_total_mib: {description: Framebuffer memory in MiB (null from lspci)., type: int}
    compute_capability:
      description: Compute capability, for example V(9.0) (null only for a GPU that nvidia-smi does not answer for
        and the project's table does not know).
      type: str
    compute_capability_source:
      description: Where it came from, V(nvidia-smi -q -x), V(nvidia-smi --query-gpu=compute_cap) or
        V(product table (<model>)).
      type: str
    mig_mode_current: {description: V(Enabled), V(Disabled) or V(N/A)., type: str}
    mig_mode_pending: {description: V(Enabled), V(Disabled) or V(N/A)., type: str}
    mig_device_count: {description: Number of MIG devices listed., type: int}
    persistence_mode: {description: V(Enabled) or V(Disabled)., type: str}
    pci_bus_id: {description: PCI address., type: str}
"""

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.driver.driver import FILES  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.driver.driver_state import installed  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.gpu import gather  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.host import NodeModule  # noqa: E402


def main() -> None:
    module = NodeModule(
        argument_spec={
            "nvidia_smi_path": {"type": "str", "default": "nvidia-smi"},
            "lspci_path": {"type": "str", "default": "lspci"},
            "use_lspci": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )
    p = module.params
    facts = gather(module, p["nvidia_smi_path"], p["lspci_path"], p["use_lspci"])
    module.exit_json(changed=False, installed_driver=installed(module, FILES["runfile_stamp"]), **facts)


if __name__ == "__main__":
    main()
