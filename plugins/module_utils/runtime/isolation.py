"""GPU isolation: whether a container that asked for no GPU may take GPUs by setting ``NVIDIA_VISIBLE_DEVICES``.

Pure (Python 3.6, no node access). Three roles ask it the same question with the same inputs and so agree: the
nvidia_container_runtime role writes the toolkit's answer into its config.toml, the gpu_sharing_stacks role gives
the NVIDIA device plugin (and HAMi) the device list strategy that still works with it, and the gpu_node_verify role
knows what the node should show.

  POLICIES         what ``kgn_gpu_envvar_unprivileged`` may say: auto, refuse, accept
  envvar_policy    the node's decision from the setting, the node's stacks and the cluster's Kubernetes version
  toolkit_settings the toolkit config.toml keys (top level) that carry the decision
  device_list_strategy  the NVIDIA device plugin's strategy under the decision

Facts (docs/isolation.md has them with their sources):
  [TK]   NVIDIA/nvidia-container-toolkit v1.20.0 internal/config/image/cuda_image.go: GPUs requested by
         NVIDIA_VISIBLE_DEVICES are honoured only for a container whose bounding capabilities hold CAP_SYS_ADMIN
         or when ``accept-nvidia-visible-devices-envvar-when-unprivileged`` is true (its default);
         ``accept-nvidia-visible-devices-as-volume-mounts`` (default false) makes the runtime read requests from
         /dev/null mounts under /var/run/nvidia-container-devices instead. Both are top-level keys of
         /etc/nvidia-container-runtime/config.toml, read by the runtime and its legacy hook alike.
  [DP]   NVIDIA/k8s-device-plugin: ``DEVICE_LIST_STRATEGY`` volume-mounts answers Allocate with those mounts (the
         environment variable from v0.9.0, the first release this project deploys).
  [GS]   gpushare's device plugin (aff8a23) hands a GPU out by NVIDIA_VISIBLE_DEVICES only.
  [NANO] nano-gpu and elastic-gpu (agent 0.3.0) hand GPUs out through their own hook, which they install over
         NVIDIA's and which runs a copy of NVIDIA's hook with NVIDIA_VISIBLE_DEVICES=none; whether that copy honours
         the toolkit setting is not in their source.
  [HAMI] HAMi v2.10.0 takes NVIDIA's strategies (volume-mounts from v2.8.0); v2.6.0 (Kubernetes 1.18-1.22 here)
         always sets NVIDIA_VISIBLE_DEVICES.
"""

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.stacks import hami
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.version import VersionError, parse_version

POLICIES = ("auto", "refuse", "accept")
SETTING = "kgn_gpu_envvar_unprivileged"
ENVVAR_KEY = "accept-nvidia-visible-devices-envvar-when-unprivileged"
MOUNTS_KEY = "accept-nvidia-visible-devices-as-volume-mounts"
# The volume-mounts request (docs/isolation.md): the runtime reads the device from the path under this folder.
MOUNTS_ROOT = "/var/run/nvidia-container-devices"
# The HAMi release that always sets NVIDIA_VISIBLE_DEVICES ([HAMI]); hami.release picks it per Kubernetes minor.
HAMI_ENVVAR_ONLY = "v2.6.0"

# stack -> why it needs the variable accepted from unprivileged containers ([GS], [NANO], [HAMI]).
_NEEDS_ENVVAR = {
    "gpushare": "gpushare's device plugin hands each pod its GPU by NVIDIA_VISIBLE_DEVICES only",
    "nano_gpu": ("nano-gpu's hook runs a copy of NVIDIA's hook asked with NVIDIA_VISIBLE_DEVICES; whether it "
                 "injects the driver's libraries when the variable is refused is not known"),
    "elastic_gpu": ("elastic-gpu's hook runs a copy of NVIDIA's hook asked with NVIDIA_VISIBLE_DEVICES; whether it "
                    "injects the driver's libraries when the variable is refused is not known"),
}
_HAMI_OLD = "HAMi v2.6.0 (the release for Kubernetes 1.18-1.22) always hands GPUs out by NVIDIA_VISIBLE_DEVICES"


def _hami_needs_envvar(kubernetes_version):
    """Whether the HAMi release this project deploys on that Kubernetes version hands GPUs out by the variable
    only; an unreadable version is left to the version checks, which refuse it by name."""
    try:
        major, minor, _ = parse_version(kubernetes_version, "kubernetes_version")
    except VersionError:
        return False
    return major == 1 and minor >= hami.OLDEST_MINOR and hami.release(minor) == HAMI_ENVVAR_ONLY


def envvar_policy(setting, stacks, kubernetes_version=""):
    """The node's decision: ``{refuse, setting, why, needed_by}``.

    ``refuse`` is true when the toolkit must ignore NVIDIA_VISIBLE_DEVICES from unprivileged containers.
    ``auto`` refuses unless one of the node's ``stacks`` can hand GPUs out by nothing else (``needed_by`` names
    them and ``why`` says what to choose); ``refuse`` with such a stack is an error (its pods would start without
    their GPU); ``accept`` keeps the toolkit's default, the old behaviour: any container on the node may take
    every GPU."""
    if setting not in POLICIES:
        raise KgnError(f"{SETTING} must be one of {', '.join(POLICIES)}, got {setting!r}: auto closes the door "
                       "wherever the node's stacks allow it, accept keeps it open (any container may take GPUs by "
                       "NVIDIA_VISIBLE_DEVICES)")
    stacks = [str(s) for s in (stacks or [])]
    needed = {stack: why for stack, why in _NEEDS_ENVVAR.items() if stack in stacks}
    if "hami" in stacks and _hami_needs_envvar(kubernetes_version):
        needed["hami"] = _HAMI_OLD
    base = {"setting": setting, "needed_by": sorted(needed)}
    if setting == "accept":
        return {**base, "refuse": False,
                "why": f"{SETTING} is accept: any container on this node may take every GPU by setting "
                       "NVIDIA_VISIBLE_DEVICES (the toolkit's default)"}
    if needed:
        reasons = "; ".join(needed[s] for s in sorted(needed))
        if setting == "refuse":
            raise KgnError(
                f"{SETTING} is refuse, but {reasons}: its pods would start without their GPU. Set {SETTING} to "
                "auto (the door stays open on these nodes, said in the report) or accept, or choose a stack that "
                "does not depend on the variable (nvidia_device_plugin, hami on Kubernetes 1.23+, nvidia_dra). "
                "Nothing was changed")
        return {**base, "refuse": False,
                "why": f"open: {reasons}, so any container on this node may take GPUs by setting "
                       f"NVIDIA_VISIBLE_DEVICES. To close it, move the node to nvidia_device_plugin, hami (Kubernetes "
                       f"1.23+) or nvidia_dra; {SETTING}: accept says you accept this"}
    return {**base, "refuse": True,
            "why": "closed: the toolkit ignores NVIDIA_VISIBLE_DEVICES from containers without CAP_SYS_ADMIN; GPUs "
                   "are handed out by the device plugin's volume mounts or CDI"}


def toolkit_settings(policy):
    """The toolkit's top-level config.toml keys for the decision. Volume-mount requests are read in every case, so
    a device plugin of either strategy hands its GPUs out (a pod can make such a request only with a hostPath
    volume, which whoever may create one could use to reach the devices anyway)."""
    return {ENVVAR_KEY: not policy["refuse"], MOUNTS_KEY: True}


def device_list_strategy(policy):
    """The NVIDIA device plugin's (and HAMi v2.10's) DEVICE_LIST_STRATEGY: volume-mounts where the variable is
    refused (the runtime then reads the plugin's mounts, [DP]), else NVIDIA's default envvar."""
    return "volume-mounts" if policy["refuse"] else "envvar"
