#!/usr/bin/python
"""Verify one host: read it live (what only verify looks at), judged on the controller by its action plugin."""

DOCUMENTATION = r"""
---
module: gpu_node_verify
short_description: Verify a GPU node or control plane, live, and return its report row (read-only)
description:
  - One call per host. The module reads the host live, what the driver, runtime and scheduler modules do not look
    at (they record what they see live themselves, the facts C(kgn_state_<concern>)). Changes nothing; safe in
    check mode.
  - Its action plugin runs the module on the host, then judges on the controller, with the checks of
    plugins/module_utils/verify/checks_*.py (verify.verify_host), what the module read, the host's recorded states
    (O(states)) and its API server's answer (O(api), the k8s_read module's, read once per API server), and
    returns the host's report row (RV(row)), every check with its diagnosis, the verdict, and what the run changed
    and repaired there. Without O(settings) it returns only what the module read (RV(observed)).
  - GPU nodes; the NVIDIA devices on the PCI bus (vendor 0x10de), the loaded kernel modules (nvidia, nouveau),
    Secure Boot, the device plugin sockets kubelet lists, the names in kubelet's plugins_registry (the registration
    sockets of DRA kubelet plugins, C(<driver>-reg.sock)), and whether a backup of containerd's config next to it
    mentions the nvidia runtime (a config rewritten by another installer).
  - Control planes; the scheduler config file's extender URLs and whether each answers, kube-proxy's mode and
    net.ipv4.conf.all.route_localnet (a NodePort on 127.0.0.1 needs them).
  - GPU nodes, the engine smoke (O(engine_smoke), docs/smoke.md); one short-lived container through the engine kubelet
    uses, the GPUs asked for as the node is configured, its C(nvidia-smi -L) compared with the host's; removed before
    and after. The one change the module can make is pulling the smoke image (O(smoke_pull)), reported as changed.
options:
  settings:
    description:
      - The verify settings of the host, for the action plugin; keys host, node_name, kinds (gpu_node, control_plane),
        stacks, expect_gpu, waived, driver_version, extra_labels, labels_require_gpu, mig_layout, gpu_facts (the
        node's GPUs the DRA checks compare with its ResourceSlices; empty = what nvidia_driver recorded), check_mode,
        engine_smoke and pod_smoke (whether the smokes are on).
      - When given, O(gpu_node), O(control_plane), O(containerd_config), O(scheduler_config_path) and O(engine_smoke)
        follow from it and the recorded states.
    type: dict
  states:
    description: The host's recorded states, concern -> C(kgn_state_<concern>) (action plugin).
    type: dict
    default: {}
  api:
    description:
      - The answer of the host's API server, for the action plugin; a k8s_read result, or the register of a
        k8s_read task looped over the API hosts (each result's C(item.host) names its API host).
    type: raw
  api_host:
    description: The host's API host (action plugin), to pick its answer out of O(api); empty for the control machine.
    type: str
    default: ""
  pod_smoke:
    description:
      - The gpu_pod_smoke module's result (action plugin), or the register of a gpu_pod_smoke task looped over batches
        of nodes; this node's entry is judged. None when it did not run.
    type: raw
  engine_smoke:
    description:
      - The engine smoke to run, C(engine) (docker, containerd, crio), C(mode) (legacy, cdi), C(cri_plugin)
        (containerd's CRI plugin); empty runs none. With O(settings) the action plugin sets it.
    type: dict
    default: {}
  smoke_image:
    description: Image of the engine smoke (sh and a full glibc).
    type: str
    default: ubuntu:24.04
  smoke_pull:
    description: Pull the smoke image when the node lacks it.
    type: bool
    default: true
  smoke_timeout:
    description: Seconds the engine smoke's container may take.
    type: int
    default: 90
  gpu_node:
    description: Read the GPU node side.
    type: bool
    default: false
  control_plane:
    description: Read the control-plane side.
    type: bool
    default: false
  device_plugin_dir:
    description: Kubelet's device plugin folder.
    type: path
    default: /var/lib/kubelet/device-plugins
  plugins_registry_dir:
    description: Kubelet's plugin registration folder (DRA kubelet plugins register there).
    type: path
    default: /var/lib/kubelet/plugins_registry
  containerd_config:
    description: containerd's config file whose backups are looked at; empty skips it.
    type: str
    default: ""
  scheduler_config_path:
    description: The scheduler config file the plan writes (its extender URLs are probed); empty skips it.
    type: str
    default: ""
  kube_proxy_mode_url:
    description: kube-proxy's metrics endpoint that answers its proxy mode.
    type: str
    default: http://127.0.0.1:10249/proxyMode
  timeout:
    description: Seconds for each command and HTTP probe.
    type: int
    default: 5
author: kube-gpu-nodes
"""

EXAMPLES = r"""
- name: Verify this host against its recorded states and its API server's answer
  kgn.gpu_nodes.gpu_node_verify:
    settings:
      host: "{{ inventory_hostname }}"
      kinds: [gpu_node]
      stacks: [gpushare]
      driver_version: "535.261.03"
    states:
      nvidia_driver: "{{ kgn_state_nvidia_driver | default({}) }}"
      container_runtime: "{{ kgn_state_container_runtime | default({}) }}"
    api: "{{ cluster }}"
  register: verified

- name: Only read what verify looks at
  kgn.gpu_nodes.gpu_node_verify:
    gpu_node: true
    containerd_config: /etc/containerd/config.toml
  register: probe
"""

RETURN = r"""
row:
  description: >-
    The host's report row (action plugin, with O(settings)): host, role, gpu, driver, cuda, runtime, mig, scheduler,
    labels, stack, verdict (ok, degraded, pending, failed), checks (each with id, title, status, summary, evidence
    and diagnosis: causes and fixes), changes (what the run changed and repaired, per concern).
  returned: with settings
  type: dict
observed:
  description: >-
    gpu_node, control_plane, pci_devices, modules, secure_boot, device_plugin {dir, dir_exists, sockets},
    kubelet_plugins_registry {dir, dir_exists, entries}, containerd_backup_mentions_nvidia,
    scheduler {config {path, exists, extender_urls}, extenders, kube_proxy_mode,
    route_localnet}, engine_smoke (the engine smoke's result, with O(engine_smoke): status, cause, summary, engine,
    mode, image, host, argv, stdout, stderr, runtime, cleanup), isolation_probe (with O(engine_smoke): a container
    that asks for no GPU and sets NVIDIA_VISIBLE_DEVICES=all; status closed, open or not_run, injected, summary).
  returned: always
  type: dict
"""

import glob  # noqa: E402  (Ansible modules keep DOCUMENTATION first)
import os  # noqa: E402
import re  # noqa: E402
import ssl  # noqa: E402
import urllib.error  # noqa: E402
import urllib.request  # noqa: E402

from ansible_collections.kgn.gpu_nodes.plugins.module_utils import host  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.smoke import smoke  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.smoke.smoke_live import (  # noqa: E402
    run_engine_smoke,
    run_isolation_probe,
)

NVIDIA_VENDOR = "0x10de"
SECURE_BOOT_VAR = "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"


def pci_gpus():
    devices = []
    for path in sorted(glob.glob("/sys/bus/pci/devices/*")):
        vendor = (host.read(os.path.join(path, "vendor")) or "").strip()
        klass = (host.read(os.path.join(path, "class")) or "").strip()
        # 0x0300xx VGA, 0x0302xx 3D controller (datacenter GPUs)
        if vendor == NVIDIA_VENDOR and klass.startswith("0x03"):
            devices.append({"address": os.path.basename(path),
                            "device": (host.read(os.path.join(path, "device")) or "").strip(), "class": klass})
    return devices


def modules():
    names = {line.split(" ", 1)[0] for line in (host.read("/proc/modules") or "").splitlines() if line}
    return {"nvidia": "nvidia" in names, "nouveau": "nouveau" in names}


def secure_boot(module, timeout):
    try:
        with open(SECURE_BOOT_VAR, "rb") as handle:
            data = handle.read()
        if data:
            return data[-1] == 1
    except OSError:
        pass
    rc, out, err = host.run(module, ["mokutil", "--sb-state"], timeout=timeout)
    text = (out or "") + (err or "")
    if rc is not None and "SecureBoot enabled" in text:
        return True
    if rc is not None and "SecureBoot disabled" in text:
        return False
    return None


def device_plugin(path):
    sockets = sorted(os.path.basename(p) for p in glob.glob(os.path.join(path, "*.sock"))
                     if os.path.basename(p) != "kubelet.sock")
    return {"dir": path, "dir_exists": os.path.isdir(path), "sockets": sockets}


def plugins_registry(path):
    """The names in kubelet's plugin registration folder (a DRA kubelet plugin's is <driver>-reg.sock)."""
    try:
        entries = sorted(os.listdir(path))
    except OSError:
        entries = []
    return {"dir": path, "dir_exists": os.path.isdir(path), "entries": entries}


def backups_mention_nvidia(path):
    """Whether a backup left next to the config (name.<stamp>~) mentions the nvidia runtime."""
    return any("nvidia" in (host.read(backup) or "") for backup in glob.glob(path + ".*~"))


def extender_urls(text):
    return re.findall(r"""["']?urlPrefix["']?\s*:\s*["']?([^"',\s}]+)""", text or "", re.I)


def http(url, timeout):
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=context) as response:
            return {"url": url, "status": response.status, "body": response.read(500).decode("utf-8", "replace"),
                    "error": ""}
    except urllib.error.HTTPError as err:
        return {"url": url, "status": err.code, "body": "", "error": f"HTTP {err.code}"}
    except (TimeoutError, urllib.error.URLError, OSError) as err:
        return {"url": url, "status": None, "body": "", "error": str(getattr(err, "reason", err))}


def scheduler_network(params):
    path, timeout = params["scheduler_config_path"], params["timeout"]
    text = host.read(path) if path else None
    urls = extender_urls(text)
    extenders = []
    for url in urls:
        answer = http(url, timeout)
        name = urllib.request.urlparse(url).hostname or ""
        extenders.append({"url": url, "reachable": answer["status"] is not None, "error": answer["error"],
                          "loopback": name in ("127.0.0.1", "localhost", "::1")})
    proxy = http(params["kube_proxy_mode_url"], timeout)
    localnet = (host.read("/proc/sys/net/ipv4/conf/all/route_localnet") or "").strip()
    return {
        "config": {"path": path, "exists": text is not None, "extender_urls": urls},
        "extenders": extenders,
        "kube_proxy_mode": proxy["body"].strip() if proxy["status"] == 200 else None,
        "route_localnet": None if not localnet else localnet == "1",
    }


def main():
    module = host.NodeModule(
        argument_spec={
            "gpu_node": {"type": "bool", "default": False},
            "control_plane": {"type": "bool", "default": False},
            "device_plugin_dir": {"type": "path", "default": "/var/lib/kubelet/device-plugins"},
            "plugins_registry_dir": {"type": "path", "default": "/var/lib/kubelet/plugins_registry"},
            "containerd_config": {"type": "str", "default": ""},
            "scheduler_config_path": {"type": "str", "default": ""},
            "kube_proxy_mode_url": {"type": "str", "default": "http://127.0.0.1:10249/proxyMode"},
            "timeout": {"type": "int", "default": 5},
            # judged by the action plugin on the controller, never sent to the node
            "settings": {"type": "dict"},
            "states": {"type": "dict", "default": {}},
            "api": {"type": "raw"},
            "api_host": {"type": "str", "default": ""},
            "pod_smoke": {"type": "raw"},
            "engine_smoke": {"type": "dict", "default": {}},
            "smoke_image": {"type": "str", "default": smoke.DEFAULT_IMAGE},
            "smoke_pull": {"type": "bool", "default": True},
            "smoke_timeout": {"type": "int", "default": 90},
        },
        supports_check_mode=True,
    )
    p = module.params
    observed = {"gpu_node": p["gpu_node"], "control_plane": p["control_plane"]}
    if p["gpu_node"]:
        observed.update({
            "pci_devices": pci_gpus(),
            "modules": modules(),
            "secure_boot": secure_boot(module, p["timeout"]),
            "device_plugin": device_plugin(p["device_plugin_dir"]),
            "kubelet_plugins_registry": plugins_registry(p["plugins_registry_dir"]),
            "containerd_backup_mentions_nvidia": backups_mention_nvidia(p["containerd_config"])
            if p["containerd_config"] else None,
        })
    if p["control_plane"]:
        observed["scheduler"] = scheduler_network(p)
    pulled = False
    wanted = p["engine_smoke"] or {}
    if p["gpu_node"] and wanted:
        try:
            observed["engine_smoke"], pulled = run_engine_smoke(
                module, wanted.get("engine") or "none", wanted.get("mode") or "legacy", p["smoke_image"],
                p["smoke_pull"], cri_plugin=wanted.get("cri_plugin") or "", timeout=p["smoke_timeout"])
            # the door check (docs/isolation.md): a container that asks for no GPU but sets NVIDIA_VISIBLE_DEVICES
            observed["isolation_probe"] = run_isolation_probe(
                module, wanted.get("engine") or "none", wanted.get("mode") or "legacy", p["smoke_image"],
                p["smoke_pull"], cri_plugin=wanted.get("cri_plugin") or "", timeout=p["smoke_timeout"])
        except KgnError as err:
            module.fail_json(msg=f"gpu_node_verify: the engine smoke: {err}", observed=observed)
    module.exit_json(changed=pulled, observed=observed)


if __name__ == "__main__":
    main()
