"""The GPU smoke tests: a short-lived container through the engine kubelet uses, and a pod through Kubernetes, each
listing the GPUs it sees, compared with the host; and, when it does not get there, the cause.

Pure (no node access, Python 3.6): the gpu_node_verify module (engine, on the node; also the gpu_smoke module) and
the gpu_pod_smoke module (pod, on the API host) run what this plans and hand back what they read; everything here
decides.

  engine_plan      the command lines of one engine smoke: the run per engine and runtime mode, the cleanup, the image
  parse_output     what the smoke workload printed (nvidia-smi -L, /dev, /proc/driver/nvidia, the environment)
  parse_smi_list   ``nvidia-smi -L`` text -> GPUs and MIG devices
  cri_runtime      the CRI's default runtime handler (what kubelet's pods run with) from containerd's config
  judge_engine     the engine smoke's result: ok, no GPU visible, failed (with its cause) or skipped
  judge_output     what the workload printed, against the host (both smokes)
  CAUSES           every cause either smoke names, with what it means and what to do (checks_smoke.py registers
                   them with the engine_smoke and pod_smoke checks)
  host_from_state  the host's GPUs from the driver's recorded state (the pod smoke's comparison)
The pod smoke's own decisions (its objects, when to stop waiting, its verdict) are in smoke_pod.py.

What the smoke workload runs is one fixed command (SCRIPT): it prints, between marker lines, what the runtime put
into the container. It decides nothing; parse_output and the judges read it.

Sources:
  [E2E]   NVIDIA/nvidia-container-toolkit tests/e2e/nvidia-container-toolkit_test.go (commit 0334eaa0): the
          toolkit's own GPU check runs ``nvidia-smi -L`` in ``ubuntu`` with ``-e NVIDIA_VISIBLE_DEVICES=all`` and
          expects the host's output; CDI requests ``nvidia.com/gpu=all``.
  [CTR]   containerd cmd/ctr/commands/run/run_unix.go: ``--runc-binary`` (io.containerd.runc.v2 only) in v1.6.20 and
          v1.7.24; ``--device`` takes a CDI name only from commit d3887b2e6 (first in v2.0.0).
  [DCDI]  CDI in Docker: moby/moby#45134 (docker run --device <CDI name>), "available as an opt-in feature in Docker
          as of Docker 25" (cncf-tags/container-device-interface#84, closing comment); the daemon's CDI feature on.
  [PROC]  NVIDIA/open-gpu-kernel-modules kernel-open/nvidia/nv-procfs.c: /proc/driver/nvidia/gpus/<bus>/information
          ("GPU UUID: \\t %s", "Device Minor: \\t %u").
"""

import re

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.runtime import isolation

# The container and pod names and labels: a leftover of an interrupted run is found (and removed) by them.
NAME = "kgn-gpu-smoke"
LABEL = "kube-gpu-nodes.io/smoke"
NODE_LABEL = "kube-gpu-nodes.io/smoke-node"
# [E2E]: the image the toolkit's own test runs the runtime's injected nvidia-smi in. NVIDIA's nvidia-smi and
# libnvidia-ml need libc, libm, libdl, libpthread and librt (readelf -d of the 550 driver's binaries): a full glibc
# userland, which busybox:glibc is not (it has no libdl.so.2) and musl images are not. docs/smoke.md.
DEFAULT_IMAGE = "ubuntu:24.04"
ENGINES = ("docker", "containerd", "crio")
MODES = ("legacy", "cdi")
RUNC_SHIMS = ("io.containerd.runc.v2", "io.containerd.runc.v1")
CDI_ALL = "nvidia.com/gpu=all"
CRI_PLUGINS = ("io.containerd.cri.v1.runtime", "io.containerd.grpc.v1.cri", "cri")
# The environment the toolkit reads in legacy mode: every GPU, and the utility capability (nvidia-smi, NVML).
LEGACY_ENV = {"NVIDIA_VISIBLE_DEVICES": "all", "NVIDIA_DRIVER_CAPABILITIES": "utility"}
# The same request as a volume mount, which the toolkit reads where it refuses the variable from unprivileged
# containers (accept-nvidia-visible-devices-as-volume-mounts; isolation.py): /dev/null at <root>/all.
LEGACY_MOUNT = {"source": "/dev/null", "destination": f"{isolation.MOUNTS_ROOT}/all"}
# The isolation probe: a container that asks for no GPU but sets the variable (docs/isolation.md).
PROBE_NAME = "kgn-gpu-isolation"

MARK = "kgn-smoke:"
# What the workload runs (sh -c): sequential prints between markers, no decision.
SCRIPT = ("echo 'kgn-smoke: nvidia-smi -L'; nvidia-smi -L 2>&1; echo \"kgn-smoke: rc $?\"; "
          "echo 'kgn-smoke: dev'; ls /dev; "
          "echo 'kgn-smoke: proc'; cat /proc/driver/nvidia/gpus/*/information 2>/dev/null; "
          "echo 'kgn-smoke: env'; env; echo 'kgn-smoke: end'")
# Environment keys kept from what the workload printed (the rest of its environment is not reported).
ENV_KEPT = re.compile(r"^(NVIDIA_|ALIYUN_COM_GPU_|CUDA_|GPU$|CDI_)")


def choice(value, choices, what):
    if value not in choices:
        raise KgnError(f"{what} must be one of {', '.join(choices)}, got {value!r}")
    return value


def _version_tuple(text):
    match = re.search(r"(\d+)\.(\d+)", str(text or ""))
    return (int(match.group(1)), int(match.group(2))) if match else None


def normalize_image(image, engine):
    """The image reference as the engine stores it. containerd (ctr) takes full names only, the way Docker
    completes them: ``ubuntu:24.04`` -> ``docker.io/library/ubuntu:24.04``; Docker takes it as written."""
    image = str(image or "").strip()
    if not image or " " in image:
        raise KgnError(f"smoke image {image!r} is not an image reference such as 'ubuntu:24.04' or "
                       "'registry.local:5000/tools/smoke:1'")
    if engine != "containerd":
        return image
    first, _, rest = image.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return image
    path = image if rest else f"library/{image}"
    if ":" not in path.rsplit("/", 1)[-1] and "@" not in path:
        path += ":latest"
    return f"docker.io/{path}"


# --- the engine smoke: command lines -----------------------------------------------------------------


def cri_runtime(config, cri_plugin=""):
    """The CRI's default runtime handler in a containerd config (``containerd config dump`` parsed, or the
    ``config`` of ``crictl info``): ``{name, runtime_type, binary, plugin}``. The handler kubelet's pods run with
    is what the engine smoke runs its container with."""
    config = config if isinstance(config, dict) else {}
    if "containerd" in config and "defaultRuntimeName" in (config.get("containerd") or {}):  # crictl info
        section = config["containerd"]
        name = section.get("defaultRuntimeName") or ""
        entry = (section.get("runtimes") or {}).get(name) or {}
        return {"name": name, "runtime_type": entry.get("runtimeType") or "",
                "binary": ((entry.get("options") or {}).get("BinaryName") or ""), "plugin": "crictl info"}
    plugins = config.get("plugins") or {}
    for plugin in ([cri_plugin] if cri_plugin else []) + list(CRI_PLUGINS):
        section = ((plugins.get(plugin) or {}).get("containerd")) or {}
        if "default_runtime_name" in section or "runtimes" in section:
            name = section.get("default_runtime_name") or "runc"
            entry = (section.get("runtimes") or {}).get(name) or {}
            return {"name": name, "runtime_type": entry.get("runtime_type") or "",
                    "binary": ((entry.get("options") or {}).get("BinaryName") or ""), "plugin": plugin}
    return {"name": "", "runtime_type": "", "binary": "", "plugin": ""}


def _legacy_request(engine):
    env = [arg for key, value in sorted(LEGACY_ENV.items()) for arg in ("--env", f"{key}={value}")]
    if engine == "docker":
        return [*env, "--volume", f"{LEGACY_MOUNT['source']}:{LEGACY_MOUNT['destination']}:ro"]
    mount = f"type=bind,src={LEGACY_MOUNT['source']},dst={LEGACY_MOUNT['destination']},options=rbind:ro"
    return [*env, "--mount", mount]


def engine_plan(engine, mode, image, engine_version="", cri=None, namespace="k8s.io", name=NAME, probe=False):
    """The command lines of one engine smoke: ``{engine, mode, image, name, run, cleanup, exists, image_present,
    pull, skip}`` (``exists`` answers 0 while the container is there).

    docker: ``docker run`` with Docker's default runtime (what kubelet's dockershim or cri-dockerd uses), the GPUs
    asked for as the node is configured: ``NVIDIA_VISIBLE_DEVICES=all`` (legacy) or ``--device nvidia.com/gpu=all``
    (cdi, Docker 25 and later with CDI on). containerd: ``ctr run`` in the CRI's namespace with the CRI's default
    runtime handler (``cri``: its runtime_type and BinaryName, from cri_runtime), as kubelet's pods get it; CDI
    devices through ctr only from containerd 2.0 [CTR]. CRI-O runs containers only through the CRI: skipped, the pod
    smoke covers it. ``skip`` says why when nothing can be run.

    In legacy mode the GPUs are asked for by the variable and by the volume mount the toolkit reads instead where
    it refuses the variable. ``probe``: the isolation probe instead, a container named PROBE_NAME that asks for no
    GPU (no mount, no CDI device) and sets only the variable, run with the engine's default runtime as a pod
    would be."""
    choice(engine, ENGINES, "the engine")
    name = PROBE_NAME if probe else name
    choice(mode, MODES, "the runtime mode")
    image = normalize_image(image, engine)
    plan = {"engine": engine, "mode": mode, "image": image, "name": name, "run": [], "cleanup": [], "exists": [],
            "image_present": [], "pull": [], "skip": ""}
    if engine == "crio":
        plan["skip"] = ("CRI-O runs containers only through the CRI (no engine CLI to run one by hand); the pod smoke "
                        "tests this node")
        return plan
    script = ["sh", "-c", SCRIPT]
    if engine == "docker":
        version = _version_tuple(engine_version)
        if mode == "cdi" and version is not None and version < (25, 0) and not probe:
            plan["skip"] = (f"Docker {engine_version} has no CDI (docker run --device takes CDI names from Docker 25, "
                            "with features.cdi on); the pod smoke tests this node")
            return plan
        request = (_probe_request() if probe else ["--device", CDI_ALL] if mode == "cdi"
                   else _legacy_request(engine))
        plan["run"] = ["docker", "run", "--name", name, "--label", f"{LABEL}={'isolation' if probe else 'engine'}",
                       "--network", "none",
                       *request, image, *script]
        plan["cleanup"] = [["docker", "rm", "--force", name]]
        plan["exists"] = ["docker", "container", "inspect", "--format", "{{.Id}}", name]
        plan["image_present"] = ["docker", "image", "inspect", "--format", "{{.Id}}", image]
        plan["pull"] = ["docker", "pull", image]
        return plan
    cri = cri or {}
    ctr = ["ctr", "--namespace", namespace]
    runtime_type = cri.get("runtime_type") or "io.containerd.runc.v2"
    if probe:
        request = _probe_request()
    elif mode == "cdi":
        version = _version_tuple(engine_version)
        if version is None or version < (2, 0):
            plan["skip"] = (f"ctr of containerd {engine_version or '(version unknown)'} cannot ask for CDI devices "
                            "(ctr run --device takes CDI names from containerd 2.0); the pod smoke tests this node")
            return plan
        request = ["--device", CDI_ALL]
    else:
        request = _legacy_request(engine)
    if runtime_type not in RUNC_SHIMS:
        plan["skip"] = (f"the CRI's default runtime {cri.get('name') or '?'} is of type {runtime_type}, which ctr "
                        "cannot be given a runtime binary for; the pod smoke tests this node")
        return plan
    runtime = ["--runtime", "io.containerd.runc.v2"]
    if cri.get("binary"):
        runtime += ["--runc-binary", cri["binary"]]
    plan["run"] = [*ctr, "run", "--label", f"{LABEL}={'isolation' if probe else 'engine'}", *runtime, *request, image,
                   name, *script]
    plan["cleanup"] = [[*ctr, "task", "delete", "--force", name], [*ctr, "containers", "delete", name]]
    plan["exists"] = [*ctr, "containers", "info", name]
    plan["image_present"] = [*ctr, "images", "list", "--quiet", f"name=={image}"]
    plan["pull"] = [*ctr, "images", "pull", image]
    return plan


def _probe_request():
    return [arg for key, value in sorted(LEGACY_ENV.items()) for arg in ("--env", f"{key}={value}")]


def image_present(rc, out):
    """Whether the image-presence command of engine_plan found the image (``ctr images list --quiet`` answers 0 and
    prints nothing when no image matches)."""
    return rc == 0 and bool(str(out or "").strip())


# --- what the workload printed ----------------------------------------------------------------------

_GPU_LINE = re.compile(r"^GPU (?P<index>\d+): (?P<name>.+?) \(UUID: (?P<uuid>GPU-[0-9A-Za-z-]+)\)\s*$")
# "  MIG 1g.10gb     Device  0: (UUID: MIG-...)" (R470+), "  MIG 1g.5gb Device 0: (UUID: MIG-GPU-.../7/0)" (R450)
_MIG_LINE = re.compile(r"^\s+MIG (?P<profile>\S+)\s+Device\s+(?P<index>\d+): \(UUID: (?P<uuid>MIG-[^)]+)\)\s*$")
_DEV = re.compile(r"^nvidia(\d+)$")


def parse_smi_list(text):
    """``nvidia-smi -L`` -> ``{gpus: [{index, name, uuid, mig: [{profile, index, uuid}]}], other: [lines]}``;
    ``other`` holds what is not a GPU or MIG line (an error, a warning)."""
    gpus, other = [], []
    for line in str(text or "").splitlines():
        gpu = _GPU_LINE.match(line.rstrip())
        mig = _MIG_LINE.match(line.rstrip())
        if gpu:
            gpus.append({"index": int(gpu.group("index")), "name": gpu.group("name").strip(),
                         "uuid": gpu.group("uuid"), "mig": []})
        elif mig and gpus:
            gpus[-1]["mig"].append({"profile": mig.group("profile"), "index": int(mig.group("index")),
                                    "uuid": mig.group("uuid")})
        elif line.strip():
            other.append(line.strip())
    return {"gpus": gpus, "other": other}


def parse_proc_information(text):
    """The GPUs of /proc/driver/nvidia/gpus/*/information files printed one after another [PROC]:
    ``[{uuid, minor, model, bus}]``."""
    found, current = [], None
    keys = {"Model": "model", "GPU UUID": "uuid", "Bus Location": "bus", "Device Minor": "minor"}
    for line in str(text or "").splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "Model":
            current = {"model": value, "uuid": "", "bus": "", "minor": None}
            found.append(current)
        elif current is not None and key in keys:
            current[keys[key]] = int(value) if key == "Device Minor" and value.isdigit() else value
    return found


def parse_output(text):
    """What the smoke workload printed -> ``{started, complete, smi: {rc, gpus, other}, devices, proc, env}``.
    ``started`` is false when no marker line is there (the container never ran the command)."""
    sections, current = {}, None
    rc = None
    for line in str(text or "").splitlines():
        if line.startswith(MARK):
            tag = line[len(MARK):].strip()
            if tag.startswith("rc "):
                value = tag[3:].strip()
                rc = int(value) if value.lstrip("-").isdigit() else None
                current = None
                continue
            current = tag
            sections.setdefault(current, [])
            continue
        if current is not None:
            sections[current].append(line)
    smi = parse_smi_list("\n".join(sections.get("nvidia-smi -L", [])))
    smi["rc"] = rc
    env = {}
    for line in sections.get("env", []):
        key, sep, value = line.partition("=")
        if sep and ENV_KEPT.match(key):
            env[key] = value
    devices = sorted(line.strip() for line in sections.get("dev", []) if line.strip().startswith("nvidia"))
    return {"started": bool(sections) or rc is not None, "complete": "end" in sections, "smi": smi,
            "devices": devices, "gpu_devices": sorted((d for d in devices if _DEV.match(d)),
                                                      key=lambda d: int(_DEV.match(d).group(1))),
            "proc": parse_proc_information("\n".join(sections.get("proc", []))), "env": env}


# --- causes ---------------------------------------------------------------------------------------------

# cause id -> (what it means, what to do). The diagnosis of the engine_smoke and pod_smoke checks.
CAUSES = {
    "no_gpu_visible": (
        "no GPU visible: the host shows no NVIDIA GPU, and the smoke workload saw none either",
        "nothing to do on a node meant to have no GPU; otherwise see the gpu_present check (GPU not passed through, "
        "fallen off the bus, driver not loaded)"),
    "engine_unavailable": (
        "the engine kubelet uses did not answer, so no container could be run",
        "start the engine (systemctl start docker / containerd) and look at its journal; site.yml repairs a stopped "
        "engine"),
    "runtime_not_found": (
        "the engine could not run the nvidia runtime binary it is configured with (not found or not executable)",
        "reinstall the NVIDIA container toolkit (site.yml reinstalls it at its pin), or fix the runtime path in the "
        "engine's config"),
    "runtime_not_registered": (
        "the engine does not know the runtime it was asked to use",
        "run site.yml (the nvidia_container_runtime role registers nvidia as the default runtime)"),
    "no_device_injected": (
        "the container asked for every GPU but the runtime injected nothing (no nvidia-smi, no /dev/nvidia*) and "
        "did not refuse either: the runtime the engine ran ignores GPU requests (default runtime not nvidia, or "
        "the nvidia runtime binary replaced by one that does not inject)",
        "check the engine's default runtime (docker info / crictl info) and that /usr/bin/nvidia-container-runtime "
        "is NVIDIA's (dpkg --verify nvidia-container-toolkit-base); site.yml sets the default and reinstalls a "
        "changed binary"),
    "utilities_not_injected": (
        "the GPU device nodes are in the container but nvidia-smi is not: the runtime injected the devices without "
        "the utility capability",
        "set NVIDIA_DRIVER_CAPABILITIES to include utility (or all) for GPU workloads, and check the toolkit's "
        "config.toml (supported-driver-capabilities)"),
    "image_lacks_glibc": (
        "the image cannot run the injected nvidia-smi: it lacks the glibc libraries NVIDIA's binaries need "
        "(libc, libm, libdl, libpthread, librt)",
        "use a glibc image with all of libc6 (ubuntu, debian:*-slim) for the smoke test "
        "(gpu_node_verify_smoke_image)"),
    "image_no_shell": (
        "the image has no /bin/sh to run the smoke command",
        "use an image with a shell (ubuntu, debian:*-slim) for the smoke test (gpu_node_verify_smoke_image)"),
    "image_missing": (
        "the smoke image is not on the node and could not be pulled",
        "import it (docker load / ctr -n k8s.io images import) on air-gapped nodes, or point "
        "gpu_node_verify_smoke_image at a registry mirror the node can reach"),
    "driver_library_mismatch": (
        "Driver/library version mismatch: the loaded kernel module and the NVML library differ (a driver upgrade "
        "without a reboot or module reload)",
        "reboot the node (or unload and reload the nvidia modules with no GPU process running); the planned upgrade "
        "playbook reboots when the kernel module changed"),
    "nvml_unknown_error": (
        "NVML failed with 'Unknown Error' inside the container: the container lost access to the GPU device nodes "
        "(typically systemd re-applied the cgroup device rules after a daemon-reload, with the systemd cgroup driver)",
        "restart the workload; for good, let the toolkit create the /dev/char symlinks (nvidia-ctk system "
        "create-dev-char-symlinks) or move to CDI (NVIDIA/nvidia-container-toolkit#48)"),
    "runtime_hook_failed": (
        "the nvidia runtime refused to start the container (nvidia-container-cli failed); its words are in the "
        "summary",
        "run `nvidia-container-cli -k -d /dev/tty info` on the node to see the same error; check the driver is loaded "
        "(nvidia-smi) and the toolkit matches the driver"),
    "cdi_unresolved": (
        "the engine could not resolve the CDI device nvidia.com/gpu=all: no CDI spec for the GPUs, or CDI is off in "
        "the engine",
        "generate the spec (nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml) and enable CDI in the engine; "
        "site.yml does both in the cdi runtime mode"),
    "driver_unreachable": (
        "nvidia-smi in the container could not talk to the driver although the host has GPUs: the device nodes "
        "were not injected",
        "compare `ls -l /dev/nvidia*` on the host and in a GPU container; check the runtime's log"),
    "gpu_mismatch": (
        "the container does not see the same GPUs as the host (count or UUIDs differ)",
        "check NVIDIA_VISIBLE_DEVICES defaults in the toolkit's config.toml and the CDI spec (stale after a GPU "
        "change: regenerate it); compare nvidia-smi -L on the host and in the container"),
    "smi_failed": (
        "nvidia-smi in the container failed; its words are in the summary",
        "run the same image by hand with the GPU requested and read nvidia-smi's message"),
    "container_failed": (
        "the engine could not start the smoke container; its words are in the summary",
        "run the command in the check's evidence by hand on the node"),
    "timeout": (
        "the smoke workload did not finish in time (a hung nvidia-smi points at a GPU fallen off the bus)",
        "look at dmesg for Xid errors and at nvidia-smi on the host"),
    # --- pods
    "pod_insufficient": (
        "the pod stays Pending: the scheduler says the node does not offer the resource (Insufficient ...): the "
        "stack's device plugin has not registered the GPUs with kubelet, or every one is taken",
        "check the device plugin pod on the node (kubectl -n kube-system get pods -o wide) and its log, and "
        "`kubectl describe node` (Capacity/Allocatable)"),
    "pod_extender_error": (
        "the pod stays Pending: kube-scheduler could not get an answer from the stack's scheduler extender",
        "check the extender's pod and Service, and that kube-scheduler reaches its URL (the extender_reachable "
        "check)"),
    "pod_not_scheduled": (
        "the pod stays Pending and no scheduler acted on it (no PodScheduled condition, no event): kube-scheduler "
        "(or the stack's own scheduler) is not running, or not for this schedulerName",
        "check kube-scheduler (the scheduler checks of the control plane) and, for a stack with its own scheduler, "
        "its Deployment"),
    "pod_unschedulable": (
        "the pod stays Pending: the scheduler found no fitting node; its words are in the summary",
        "read the message: a taint the pod does not tolerate (gpu_node_verify_pod_smoke_tolerations), a node name "
        "that is not the node's (gpu_node_verify_node_name)"),
    "pod_image_pull": (
        "the pod's image could not be pulled (ErrImagePull / ImagePullBackOff)",
        "import the image on the node, or point gpu_node_verify_smoke_image at a registry mirror the node reaches"),
    "pod_sandbox_failed": (
        "kubelet could not create the pod's sandbox or container; the runtime's words are in the summary (e.g. "
        "no runtime for \"nvidia\" is configured)",
        "check the engine's runtime configuration on the node (site.yml) and kubelet's log"),
    "pod_admission_failed": (
        "kubelet refused the pod at admission (UnexpectedAdmissionError): the device plugin's Allocate failed",
        "read the device plugin's log on the node; restart its pod"),
    "pod_no_gpu": (
        "the pod ran, but its log does not show the GPU it was given",
        "read the pod's log in the summary: which GPU and environment the device plugin handed in"),
    "pod_limit_missing": (
        "the pod ran, but its environment does not show the limit the stack should have given it",
        "check the stack's device plugin version and its Allocate (the variables it sets are listed in "
        "docs/smoke.md)"),
    "pod_failed": (
        "the pod failed; the reason and its log are in the summary",
        "read the pod's events and log"),
    "pod_create_failed": (
        "the pod could not be created; the API's words are in the summary",
        "check the namespace exists and that no admission webhook or quota refuses pods there "
        "(gpu_node_verify_pod_smoke_namespace)"),
    "pod_timeout": (
        "the pod did not finish in time",
        "read its events; raise gpu_node_verify_pod_smoke_timeout on slow image pulls"),
    "pod_not_deleted": (
        "the smoke pod could not be deleted; it is left in the cluster",
        "delete it by hand: kubectl delete pod -l kube-gpu-nodes.io/smoke"),
}


def first_line(text):
    for line in str(text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


def host_view(smi_rc, smi_text, pci_gpus=0, smi_found=True):
    """What the host shows: ``{listed, gpus, error, pci_gpus, smi_found, present}`` from the host's own
    ``nvidia-smi -L`` (and the GPUs lspci sees when nvidia-smi cannot answer)."""
    parsed = parse_smi_list(smi_text if smi_rc == 0 else "")
    return {"listed": smi_rc == 0, "gpus": parsed["gpus"], "error": "" if smi_rc == 0 else first_line(smi_text),
            "pci_gpus": int(pci_gpus or 0), "smi_found": bool(smi_found),
            "present": bool(parsed["gpus"]) or bool(pci_gpus)}


def verdict(status, cause, summary, **extra):
    result = {"status": status, "cause": cause, "summary": summary}
    result.update(extra)
    return result


def _refusal(stderr, host):
    """Why the engine could not start the container (``(status, cause, words)``), from its error output."""
    words = " ".join(line.strip() for line in str(stderr or "").splitlines() if line.strip())
    text = words.lower()
    if "driver/library version mismatch" in text:
        return "failed", "driver_library_mismatch", words
    if "nvidia-container-cli" in text:
        if not host["present"] and ("driver not loaded" in text or "no nvidia" in text or "load library failed" in text
                                    or "no cuda-capable device" in text or "no devices" in text):
            return "no_gpu", "no_gpu_visible", words
        return "failed", "runtime_hook_failed", words
    if "cdi" in text and ("unresolvable" in text or "device injection" in text or "could not select device driver"
                          in text or "unknown device" in text):
        if not host["present"]:
            return "no_gpu", "no_gpu_visible", words
        return "failed", "cdi_unresolved", words
    if "unknown or invalid runtime name" in text or "unknown runtime" in text:
        return "failed", "runtime_not_registered", words
    if re.search(r'exec: "(/bin/)?sh": (executable file not found|stat .*no such file)', words):
        return "failed", "image_no_shell", words
    if "nvidia-container-runtime" in text and ("executable file not found" in text or "no such file" in text
                                               or "permission denied" in text or "exec format error" in text):
        return "failed", "runtime_not_found", words
    if "no such image" in text or ("image" in text and "not found" in text):
        return "failed", "image_missing", words
    if "cannot connect to the docker daemon" in text or ("connection refused" in text and "containerd" in text):
        return "failed", "engine_unavailable", words
    return "failed", "container_failed", words


def seen_summary(seen):
    gpus = seen["smi"]["gpus"]
    migs = [m for g in gpus for m in g["mig"]]
    text = ", ".join(f"GPU {g['index']}: {g['name']} ({g['uuid']})" for g in gpus)
    return text + (f"; {len(migs)} MIG device(s)" if migs else "")


def compare(seen, host):
    """Same GPUs as the host (by UUID); MIG devices the container lists must be the host's."""
    if not host["listed"]:
        return "ok", "", (f"{len(seen['smi']['gpus'])} GPU(s) seen: {seen_summary(seen)}; the host's nvidia-smi "
                          f"did not answer ({host['error'] or 'not found'}), so not compared")
    want = {g["uuid"] for g in host["gpus"]}
    got = {g["uuid"] for g in seen["smi"]["gpus"]}
    host_mig = {m["uuid"] for g in host["gpus"] for m in g["mig"]}
    got_mig = {m["uuid"] for g in seen["smi"]["gpus"] for m in g["mig"]}
    problems = []
    if want - got:
        problems.append(f"missing {', '.join(sorted(want - got))}")
    if got - want:
        problems.append(f"not on the host {', '.join(sorted(got - want))}")
    if got_mig - host_mig:
        problems.append(f"MIG devices not on the host {', '.join(sorted(got_mig - host_mig))}")
    if problems:
        return "failed", "gpu_mismatch", (f"the container sees {len(got)} GPU(s), the host {len(want)}: "
                                          f"{'; '.join(problems)}")
    mig_note = (f"; {len(got_mig)} of the host's {len(host_mig)} MIG devices listed" if host_mig else "")
    return "ok", "", f"{len(got)} GPU(s), as on the host: {seen_summary(seen)}{mig_note}"


def judge_output(seen, host):
    """What the workload printed, judged against the host: ``(status, cause, summary)``. Shared by both smokes."""
    smi = seen["smi"]
    text = " ".join(smi["other"])
    lower = text.lower()
    if smi["gpus"] and smi["rc"] == 0:
        return compare(seen, host)
    if "error while loading shared libraries" in lower:
        return "failed", "image_lacks_glibc", f"nvidia-smi was injected but cannot load: {text}"
    if "driver/library version mismatch" in lower:
        return "failed", "driver_library_mismatch", text
    if smi["rc"] == 127 or "not found" in lower:  # no nvidia-smi in the container
        if seen["gpu_devices"]:
            return "failed", "utilities_not_injected", (f"{', '.join('/dev/' + d for d in seen['gpu_devices'])} "
                                                        "injected, but no nvidia-smi")
        if host["present"] or host["smi_found"]:
            why = (f"the host has {len(host['gpus']) or host['pci_gpus']} GPU(s)" if host["present"]
                   else "the host has the driver's nvidia-smi")
            return "failed", "no_device_injected", (f"the container ran but got no nvidia-smi and no /dev/nvidia*, "
                                                    f"while {why}: the GPU request was ignored")
        return "no_gpu", "no_gpu_visible", "no GPU visible: no NVIDIA driver or GPU on the host, none in the container"
    # nvidia-smi was injected and ran, but listed no GPU
    if not host["present"]:
        return "no_gpu", "no_gpu_visible", (f"no GPU visible: the runtime injected nvidia-smi, which lists none "
                                            f"({first_line(text) or 'exit code ' + str(smi['rc'])}), as on the host")
    if "failed to initialize nvml: unknown error" in lower:
        return "failed", "nvml_unknown_error", text
    if "couldn't communicate with the nvidia driver" in lower:
        return "failed", "driver_unreachable", f"nvidia-smi in the container: {text}"
    if "no devices were found" in lower or smi["rc"] == 0:
        return "failed", "no_device_injected", f"nvidia-smi in the container lists no GPU{': ' + text if text else ''}"
    return "failed", "smi_failed", f"nvidia-smi in the container: {text or 'exit code ' + str(smi['rc'])}"


def judge_engine(plan, host, run=None, image=None, engine_state=None):
    """The engine smoke's result. ``plan`` from engine_plan; ``host`` from host_view; ``run``: ``{rc, stdout,
    stderr, timed_out, runtime}`` of the container (None when it was not run); ``image``: ``{present, pulled,
    error, check_mode}``; ``engine_state``: ``{answered, error}``. Returns ``{status, cause, summary, seen}``."""
    image = image or {}
    if plan.get("skip"):
        return verdict("skipped", "", f"skipped: {plan['skip']}")
    if engine_state is not None and not engine_state.get("answered"):
        return verdict("failed", "engine_unavailable",
                       f"{plan['engine']} did not answer: {first_line(engine_state.get('error')) or 'no answer'}")
    if not image.get("present"):
        if image.get("check_mode"):
            return verdict("skipped", "", f"skipped: the image {plan['image']} is not on the node and a check-mode "
                                          "run pulls nothing")
        return verdict("failed", "image_missing", f"the image {plan['image']} is not on the node and the pull failed: "
                                                  f"{first_line(image.get('error')) or 'pulling is off'}")
    if run is None:
        return verdict("skipped", "", "skipped: not run")
    if run.get("timed_out"):
        return verdict("failed", "timeout", f"the container did not finish in {run.get('timeout')} s")
    seen = parse_output(run.get("stdout"))
    if not seen["started"]:
        status, cause, words = _refusal(run.get("stderr") or run.get("stdout"), host)
        summary = (f"no GPU visible: the nvidia runtime found no GPU to give the container ({words})"
                   if status == "no_gpu" else f"{plan['engine']} could not start the container: {words}")
        return verdict(status, cause, summary, seen=seen)
    status, cause, summary = judge_output(seen, host)
    return verdict(status, cause, summary, seen=seen)


def judge_isolation(plan, run=None, image=None, engine_state=None):
    """The isolation probe's result (plan from ``engine_plan(..., probe=True)``): ``{status, injected, summary}``.
    ``closed``: the container, which asked for no GPU, got no GPU device node and no nvidia-smi; ``open``: the
    runtime injected what ``injected`` lists (what was injected, so it says something true on a node without a
    GPU too); ``not_run``: why the probe could not tell."""
    image = image or {}
    if plan.get("skip"):
        return {"status": "not_run", "injected": [], "summary": f"not run: {plan['skip']}"}
    if engine_state is not None and not engine_state.get("answered"):
        return {"status": "not_run", "injected": [],
                "summary": f"not run: {plan['engine']} did not answer ({first_line(engine_state.get('error'))})"}
    if not image.get("present"):
        return {"status": "not_run", "injected": [],
                "summary": f"not run: the image {plan['image']} is not on the node"
                           + ("" if image.get("check_mode") else f" ({first_line(image.get('error')) or 'no pull'})")}
    if run is None:
        return {"status": "not_run", "injected": [], "summary": "not run"}
    seen = parse_output(run.get("stdout"))
    if not seen["complete"]:
        words = first_line(run.get("stderr") or run.get("stdout")) or f"exit code {run.get('rc')}"
        return {"status": "not_run", "injected": [], "summary": f"the probe container did not run: {words}"}
    return judge_isolation_output(seen, "a container")


def judge_isolation_output(seen, who):
    """``open`` or ``closed`` from what a probe that ran printed (``seen``: parse_output of its log, complete);
    ``who``: "a container" or "a pod", for the summary."""
    injected = [f"/dev/{name}" for name in seen["gpu_devices"]]
    if seen["smi"]["rc"] not in (None, 127):
        injected.append("nvidia-smi")
    request = f"{who} that asked for no GPU, with NVIDIA_VISIBLE_DEVICES=all"
    if injected:
        return {"status": "open", "injected": injected,
                "summary": f"open: {request}, got {', '.join(injected)} from the runtime"}
    return {"status": "closed", "injected": [], "summary": f"closed: {request}, got no GPU device and no nvidia-smi"}


# --- the host's GPUs from what the driver's module recorded ------------------------------------------------


def host_from_state(driver_state):
    """The host's GPUs as host_view shows them, from the nvidia_driver module's recorded state (kgn_state_nvidia_driver:
    its live ``nvidia-smi -q -x``), for the pod smoke, which runs on the API host and cannot ask the node itself; {}
    when nothing was recorded (the pod's GPUs are then not compared)."""
    live = (driver_state or {}).get("live") if isinstance(driver_state, dict) else None
    gpu = (live or {}).get("gpu") or {}
    if not isinstance(gpu, dict) or not gpu:
        return {}
    answered = bool(((live or {}).get("nvidia_smi") or {}).get("answered"))
    gpus = [{"index": g.get("index", i), "name": g.get("product_name") or "", "uuid": g.get("uuid") or "", "mig": []}
            for i, g in enumerate(gpu.get("gpus") or []) if isinstance(g, dict)] if answered else []
    return {"listed": answered, "gpus": gpus, "error": "" if answered else "nvidia-smi did not answer on the node",
            "pci_gpus": 0, "smi_found": answered, "present": bool(gpu.get("gpu_present")) or bool(gpus)}


def pod_smoke_batches(requests):
    """The pod smokes of a play's GPU nodes grouped into one gpu_pod_smoke call per API server: ``requests`` holds
    each node's (the gpu_node_verify role's, from its own variables) ``{target: kube_api's {host, delegate_to,
    kubeconfig, where}, namespace, kubectl, request_timeout, node: {node_name, ...}}``; the nodes that share all but
    ``node`` go into one batch ``{host, delegate_to, kubeconfig, where, namespace, kubectl, request_timeout,
    nodes}``, in the order first seen."""
    if not isinstance(requests, (list, tuple)):
        raise KgnError(f"pod_smoke_batches: the requests must be a list, got {type(requests).__name__}")
    batches = []
    for request in requests:
        if not isinstance(request, dict) or not isinstance(request.get("target"), dict) or \
                not isinstance(request.get("node"), dict) or not request["node"].get("node_name"):
            raise KgnError(f"pod_smoke_batches: each request needs a target and a node with its node_name, got "
                           f"{request!r}")
        common = dict(request["target"], **{key: request.get(key) for key in ("namespace", "kubectl",
                                                                              "request_timeout")})
        batch = next((b for b in batches if b["common"] == common), None)
        if batch is None:
            batch = {"common": common, "nodes": []}
            batches.append(batch)
        batch["nodes"].append(dict(request["node"]))
    return [dict(b["common"], nodes=b["nodes"]) for b in batches]
