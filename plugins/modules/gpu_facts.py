#!/usr/bin/python
"""gpu_facts: NVIDIA GPU facts from nvidia-smi -q -x, with lspci as the fallback."""

DOCUMENTATION = r"""
---
module: gpu_facts
short_description: Gather NVIDIA GPU facts from nvidia-smi (or lspci when the driver is not loaded)
version_added: "1.0.0"
description:
  - Runs C(nvidia-smi -q -x) and returns the GPU count, product names, UUIDs, memory (MiB), driver and
    CUDA versions, compute capability (when nvidia-smi prints it), MIG mode (current and pending) and
    persistence mode of every GPU.
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
    compute_capability: {description: Compute capability when nvidia-smi prints it, else null., type: str}
    mig_mode_current: {description: V(Enabled), V(Disabled) or V(N/A)., type: str}
    mig_mode_pending: {description: V(Enabled), V(Disabled) or V(N/A)., type: str}
    mig_device_count: {description: Number of MIG devices listed., type: int}
    persistence_mode: {description: V(Enabled) or V(Disabled)., type: str}
    pci_bus_id: {description: PCI address., type: str}
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402  (module docs come first)
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.gpu import gather  # noqa: E402


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "nvidia_smi_path": {"type": "str", "default": "nvidia-smi"},
            "lspci_path": {"type": "str", "default": "lspci"},
            "use_lspci": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )
    p = module.params
    module.exit_json(changed=False, **gather(module, p["nvidia_smi_path"], p["lspci_path"], p["use_lspci"]))


if __name__ == "__main__":
    main()
