#!/usr/bin/python
"""Read-only probes of a node's real GPU / runtime / scheduler state for gpu_node_verify."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_node_probe
short_description: Observe a node's GPU, container runtime and kube-scheduler state (read-only)
description:
  - Reads the real state of the node independently of what earlier plays registered, and returns it as
    plain data for the C(kgn_verify_checks) filter. Changes nothing; safe in check mode.
  - GPU nodes, the PCI bus (vendor 0x10de), loaded modules (nvidia, nouveau), /proc/driver/nvidia/version,
    C(nvidia-smi), the installed driver package, Secure Boot state, C(docker info) / C(containerd config dump) /
    C(crio config), the device plugin sockets.
  - Control planes, the running kube-scheduler's flags, the systemd unit or kubeadm manifest, the scheduler
    config file's extender URLs, C(/healthz), extender reachability, kube-proxy's mode.
options:
  gpu_node:
    description: Probe the GPU node side.
    type: bool
    default: false
  control_plane:
    description: Probe the control-plane side.
    type: bool
    default: false
  container_runtime:
    description: Engine to inspect; V(auto) picks docker when its CLI exists, else containerd, else crio.
    type: str
    default: auto
    choices: [auto, docker, containerd, crio]
  device_plugin_dir:
    description: Kubelet's device plugin folder.
    type: path
    default: /var/lib/kubelet/device-plugins
  scheduler_flag:
    description: The scheduler flag that points at the config (V(config) or V(policy-config-file)).
    type: str
    default: config
  scheduler_config_path:
    description: Path of the scheduler-policy-config file.
    type: path
    default: /etc/kubernetes/scheduler-policy-config.yaml
  scheduler_health_url:
    description: kube-scheduler's health URL for its version.
    type: str
    default: https://127.0.0.1:10259/healthz
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
- name: Observe the node
  gpu_node_probe:
    gpu_node: true
    container_runtime: containerd
  check_mode: false
  register: __gpu_node_verify_probe
"""

RETURN = r"""
observed:
  description: What the node shows now (gpu, runtime, device_plugin, scheduler); see the role README.
  returned: always
  type: dict
"""

import glob  # noqa: E402  (Ansible modules keep DOCUMENTATION first)
import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import shlex  # noqa: E402
import ssl  # noqa: E402
import urllib.error  # noqa: E402
import urllib.request  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

NVIDIA_VENDOR = "0x10de"
SECURE_BOOT_VAR = "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"


def _read(path, limit=200000):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read(limit)
    except OSError:
        return None


def _run(module, argv, timeout):
    """Run argv; return (rc, stdout, stderr); rc None when the binary is missing."""
    if not module.get_bin_path(argv[0]):
        return None, "", f"{argv[0]}: command not found"
    rc, out, err = module.run_command(["timeout", str(timeout), *argv])
    return rc, out, err


# --- GPU -------------------------------------------------------------------------------------


def _pci_gpus():
    devices = []
    for path in sorted(glob.glob("/sys/bus/pci/devices/*")):
        vendor = (_read(os.path.join(path, "vendor")) or "").strip()
        klass = (_read(os.path.join(path, "class")) or "").strip()
        # 0x0300xx VGA, 0x0302xx 3D controller (datacenter GPUs)
        if vendor == NVIDIA_VENDOR and klass.startswith("0x03"):
            devices.append({
                "address": os.path.basename(path),
                "device": (_read(os.path.join(path, "device")) or "").strip(),
                "class": klass,
            })
    return devices


def _modules():
    text = _read("/proc/modules") or ""
    names = {line.split(" ", 1)[0] for line in text.splitlines() if line}
    return {"nvidia": "nvidia" in names, "nouveau": "nouveau" in names}


def _secure_boot(module, timeout):
    data = None
    try:
        with open(SECURE_BOOT_VAR, "rb") as handle:
            data = handle.read()
    except OSError:
        pass
    if data:
        return data[-1] == 1
    rc, out, err = _run(module, ["mokutil", "--sb-state"], timeout)
    text = (out or "") + (err or "")
    if rc is not None and "SecureBoot enabled" in text:
        return True
    if rc is not None and "SecureBoot disabled" in text:
        return False
    return None


def _driver_package(module, timeout):
    """Version of the installed driver package (Debian/Ubuntu dpkg, RHEL rpm)."""
    for name in ("nvidia-driver", "nvidia-kernel-dkms", "nvidia-driver-libs", "nvidia-smi"):
        rc, out, _ = _run(module, ["dpkg-query", "-W", "-f=${db:Status-Abbrev} ${Version}", name], timeout)
        if rc == 0 and out[:2] in ("ii", "hi"):  # "hi": installed and held, as nvidia_driver leaves it
            return name, out.split()[-1]
    for name in ("nvidia-driver", "cuda-drivers", "nvidia-open"):
        rc, out, _ = _run(module, ["rpm", "-q", "--qf", "%{VERSION}", name], timeout)
        if rc == 0 and out.strip():
            return name, out.strip()
    return None, None


def _smi(module, timeout):
    query = ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader,nounits"]
    rc, out, err = _run(module, query, timeout)
    result = {"found": rc is not None, "rc": rc, "error": "", "gpus": [], "cuda_version": ""}
    if rc is None:
        result["error"] = err
        return result
    if rc != 0:
        result["error"] = (out + "\n" + err).strip()
        return result
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 2:
            result["gpus"].append({"name": parts[0], "driver_version": parts[1],
                                   "memory_total_mib": parts[2] if len(parts) > 2 else ""})
    rc, out, _ = _run(module, ["nvidia-smi"], timeout)
    match = re.search(r"CUDA Version:\s*([0-9.]+)", out or "")
    result["cuda_version"] = match.group(1) if match else ""
    return result


def probe_gpu(module, timeout):
    devices = _pci_gpus()
    version_text = _read("/proc/driver/nvidia/version") or ""
    match = re.search(r"Kernel Module(?: for [\w-]+)?\s+([0-9]+\.[0-9]+(?:\.[0-9]+)?)", version_text)
    package_name, package_version = _driver_package(module, timeout)
    return {
        "present": bool(devices),
        "pci_devices": devices,
        "modules": _modules(),
        "kernel_driver_version": match.group(1) if match else None,
        "package_name": package_name,
        "package_version": package_version,
        "secure_boot": _secure_boot(module, timeout),
        "smi": _smi(module, timeout),
    }


# --- container runtime -----------------------------------------------------------------------


def _docker(module, timeout):
    rc, out, err = _run(module, ["docker", "info", "--format", "{{json .}}"], timeout)
    result = {"installed": rc is not None, "answered": False, "error": "", "config_path": "/etc/docker/daemon.json"}
    if rc is None:
        result["error"] = err
        return result
    try:
        info = json.loads(out)
    except ValueError:
        info = {}
    if rc != 0 or not info.get("ServerVersion"):
        result["error"] = (err or out or "no answer").strip()
        return result
    result.update({
        "answered": True,
        "version": info.get("ServerVersion"),
        "default_runtime": info.get("DefaultRuntime") or "",
        "runtimes": sorted((info.get("Runtimes") or {}).keys()),
    })
    return result


_RUNTIME_HEADER = re.compile(r"""^\s*\[plugins\.["']?([\w.]+)["']?\.containerd\.runtimes\.["']?([\w-]+)["']?\]\s*$""",
                             re.M)
_DEFAULT_NAME = re.compile(r"""^\s*default_runtime_name\s*=\s*["']([^"']*)["']""", re.M)


def _containerd_backups(path):
    """Whether any backup Ansible left next to the config mentions the nvidia runtime."""
    return any("nvidia" in (_read(backup) or "") for backup in glob.glob(path + ".*~"))


def _containerd(module, timeout):
    path = "/etc/containerd/config.toml"
    rc, out, err = _run(module, ["containerd", "config", "dump"], timeout)
    text = _read(path)
    result = {"installed": rc is not None, "answered": False, "error": "", "config_path": path,
              "config_mentions_nvidia": None if text is None else "nvidia" in text,
              "backup_mentions_nvidia": _containerd_backups(path)}
    if rc is None:
        result["error"] = err
        return result
    if rc != 0:
        result["error"] = (err or out).strip()
        return result
    runtimes = sorted({m.group(2) for m in _RUNTIME_HEADER.finditer(out)})
    default = _DEFAULT_NAME.search(out)
    vrc, vout, _ = _run(module, ["containerd", "--version"], timeout)
    version = re.search(r"\s(v?[0-9]+\.[0-9]+\.[0-9]+)", vout or "") if vrc == 0 else None
    result.update({
        "answered": True,
        "default_runtime": default.group(1) if default else "",
        "runtimes": runtimes,
        "version": version.group(1).lstrip("v") if version else "",
    })
    return result


def _crio(module, timeout):
    rc, out, err = _run(module, ["crio", "config"], timeout)
    result = {"installed": rc is not None, "answered": False, "error": "", "config_path": "/etc/crio/crio.conf.d"}
    if rc is None or rc != 0:
        result["error"] = (err or out).strip()
        return result
    default = re.search(r"""^\s*default_runtime\s*=\s*["']([^"']*)["']""", out, re.M)
    runtimes = sorted(set(re.findall(r"""^\s*\[crio\.runtime\.runtimes\.["']?([\w.-]+)["']?\]""", out, re.M)))
    result.update({"answered": True, "default_runtime": default.group(1) if default else "", "runtimes": runtimes})
    return result


def probe_runtime(module, requested, timeout):
    """Probe every installed engine; ``engine`` is a first guess the role may resolve further."""
    probes = {"docker": _docker, "containerd": _containerd, "crio": _crio}
    result = {"requested": requested, "installed": {}}
    for name, probe in probes.items():
        if module.get_bin_path(name):
            result[name] = probe(module, timeout)
            result["installed"][name] = result[name].get("version") or _client_version(module, name, timeout)
        else:
            result["installed"][name] = None
    result["cri_dockerd"] = bool(module.get_bin_path("cri-dockerd"))
    # the NVIDIA runtime shim on disk means the node was meant to use it (toolkit installed)
    result["toolkit_installed"] = bool(module.get_bin_path("nvidia-container-runtime"))
    if requested != "auto":
        result["engine"] = requested
    else:
        result["engine"] = next((n for n in ("docker", "containerd", "crio") if result["installed"][n]), "none")
    return result


def _client_version(module, name, timeout):
    rc, out, _ = _run(module, [name, "--version"], timeout)
    match = re.search(r"([0-9]+\.[0-9]+\.[0-9]+)", out or "") if rc == 0 else None
    return match.group(1) if match else "unknown"


def probe_device_plugin(path):
    sockets = sorted(os.path.basename(p) for p in glob.glob(os.path.join(path, "*.sock"))
                     if os.path.basename(p) != "kubelet.sock")
    return {"dir": path, "dir_exists": os.path.isdir(path), "sockets": sockets}


# --- control plane ---------------------------------------------------------------------------


def _flags(argv):
    """{flag: value} from an argument list (--a=b and --a b)."""
    flags = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg.startswith("--"):
            if "=" in arg:
                key, value = arg[2:].split("=", 1)
            elif i + 1 < len(argv) and not argv[i + 1].startswith("-"):
                key, value = arg[2:], argv[i + 1]
                i += 1
            else:
                key, value = arg[2:], "true"
            flags[key] = value.strip("\"'")
        i += 1
    return flags


def _scheduler_process():
    for path in glob.glob("/proc/[0-9]*/cmdline"):
        raw = None
        try:
            with open(path, "rb") as handle:
                raw = handle.read()
        except OSError:
            continue
        argv = [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]
        # argv[0] for the binary; argv[1] when an interpreter runs it (the lab's stand-in is a script)
        for index in (0, 1):
            if len(argv) > index and os.path.basename(argv[index]) == "kube-scheduler":
                return {"running": True, "pid": int(path.split("/")[2]), "flags": _flags(argv[index + 1:])}
    return {"running": False, "flags": {}}


def _scheduler_persisted(module, timeout):
    manifest = "/etc/kubernetes/manifests/kube-scheduler.yaml"
    text = _read(manifest)
    if text is not None:
        # the static pod's command list: "- --config=/etc/kubernetes/..." lines
        args = [m.group(1).strip().strip("\"'") for m in re.finditer(r"^\s*-\s+(--\S.*)$", text, re.M)]
        return {"style": "kubeadm", "path": manifest, "flags": _flags(args)}
    rc, out, _ = _run(module, ["systemctl", "show", "-p", "FragmentPath", "--value", "kube-scheduler.service"], timeout)
    fragment = (out or "").strip() if rc == 0 else ""
    if fragment and os.path.exists(fragment):
        unit = _read(fragment) or ""
        for dropin in sorted(glob.glob(fragment + ".d/*.conf") +
                             glob.glob("/etc/systemd/system/kube-scheduler.service.d/*.conf")):
            unit += "\n" + (_read(dropin) or "")
        # ExecStart with its backslash-continued lines
        exec_lines = re.findall(r"^ExecStart=((?:[^\n]*\\\n)*[^\n]*)", unit, re.M)
        command = exec_lines[-1].replace("\\\n", " ") if exec_lines else ""
        try:
            argv = shlex.split(command)
        except ValueError:
            argv = command.split()
        return {"style": "systemd", "path": fragment, "flags": _flags(argv[1:])}
    return {"style": "unknown", "path": "", "flags": {}}


def _extender_urls(text):
    return re.findall(r"""["']?urlPrefix["']?\s*:\s*["']?([^"',\s}]+)""", text or "", re.I)


def _http(url, timeout):
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
        reason = getattr(err, "reason", err)
        return {"url": url, "status": None, "body": "", "error": str(reason)}


def probe_scheduler(params, module):
    timeout = params["timeout"]
    text = _read(params["scheduler_config_path"])
    urls = _extender_urls(text)
    extenders = []
    for url in urls:
        answer = _http(url, timeout)
        host = urllib.request.urlparse(url).hostname or ""
        extenders.append({"url": url, "reachable": answer["status"] is not None, "error": answer["error"],
                          "loopback": host in ("127.0.0.1", "localhost", "::1")})
    proxy = _http(params["kube_proxy_mode_url"], timeout)
    localnet = (_read("/proc/sys/net/ipv4/conf/all/route_localnet") or "").strip()
    return {
        "process": _scheduler_process(),
        "persisted": _scheduler_persisted(module, timeout),
        "config": {"path": params["scheduler_config_path"], "exists": text is not None, "extender_urls": urls},
        "health": _http(params["scheduler_health_url"], timeout),
        "extenders": extenders,
        "kube_proxy_mode": proxy["body"].strip() if proxy["status"] == 200 else None,
        "route_localnet": None if not localnet else localnet == "1",
    }


def main():
    module = AnsibleModule(
        argument_spec={
            "gpu_node": {"type": "bool", "default": False},
            "control_plane": {"type": "bool", "default": False},
            "container_runtime": {
                "type": "str", "default": "auto", "choices": ["auto", "docker", "containerd", "crio"]},
            "device_plugin_dir": {"type": "path", "default": "/var/lib/kubelet/device-plugins"},
            "scheduler_flag": {"type": "str", "default": "config"},
            "scheduler_config_path": {"type": "path", "default": "/etc/kubernetes/scheduler-policy-config.yaml"},
            "scheduler_health_url": {"type": "str", "default": "https://127.0.0.1:10259/healthz"},
            "kube_proxy_mode_url": {"type": "str", "default": "http://127.0.0.1:10249/proxyMode"},
            "timeout": {"type": "int", "default": 5},
        },
        supports_check_mode=True,
    )
    params = module.params
    observed = {}
    if params["gpu_node"]:
        observed["gpu"] = probe_gpu(module, params["timeout"])
        observed["runtime"] = probe_runtime(module, params["container_runtime"], params["timeout"])
        observed["device_plugin"] = probe_device_plugin(params["device_plugin_dir"])
    if params["control_plane"]:
        observed["scheduler"] = probe_scheduler(params, module)
    module.exit_json(changed=False, observed=observed)


if __name__ == "__main__":
    main()
