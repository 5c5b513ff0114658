"""NVIDIA's DRA driver for GPUs: the facts of the pinned release the nvidia_dra stack deploys, and every Dynamic
Resource Allocation decision (which resource.k8s.io version, refusals, device classes, claims, the node switch,
and the checks of what the kubelet plugin publishes).

Pure Python, standard library only, Python 3.6 grammar: the k8s_manifests module runs it on the control plane.

Pinned release: v0.4.1 of https://github.com/kubernetes-sigs/dra-driver-nvidia-gpu (formerly
NVIDIA/k8s-dra-driver-gpu, whose last tag was v25.12.0), tag commit 764900e7833798a1528bd52a2af3e1b2d5f7a616.
The Helm chart and the driver's source were read as one set at that commit; every fact below cites a file of it
(chart = deployments/helm/dra-driver-nvidia-gpu):

  chart/Chart.yaml            kubeVersion ">=1.32.0-0", appVersion 0.4.1 (image tag v0.4.1).
  chart/values.yaml           image registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu; nvidiaDriverRoot "/";
                              nvidiaCDIHookPath "" (the driver copies its own nvidia-cdi-hook); resources.gpus and
                              resources.computeDomains enabled; webhook and network policies off; kubelet plugin
                              paths /var/lib/kubelet/plugins_registry and /var/lib/kubelet/plugins, health ports 51515
                              (compute domains) and 51516 (gpus), toleration nvidia.com/gpu NoSchedule; controller
                              tolerations and affinity for control-plane nodes; logVerbosity "4".
  chart/templates/_helpers.tpl  object names from the chart name dra-driver-nvidia-gpu; service accounts
                              dra-driver-nvidia-gpu-service-account-{kubeletplugin,controller}; the
                              resource.k8s.io version is the highest the cluster serves (v1 > v1beta2 > v1beta1) or
                              values.resourceApiVersion.
  chart/templates/validation.yaml  refuses resources.gpus.enabled without gpuResourcesEnabledOverride, because "this
                              DRA driver cannot be deployed alongside the standard GPU device plugin on the same
                              node" until KEP 5004 is GA; refuses a cluster that serves no resource.k8s.io version.
  chart/templates/deviceclass-*.yaml  the five DeviceClasses and their CEL selectors (DEVICE_CLASSES, verbatim);
                              gpu.nvidia.com gets extendedResourceName nvidia.com/gpu on resource.k8s.io/v1.
  chart/templates/validatingadmissionpolicy{,binding}.yaml  admissionregistration.k8s.io/v1 policy
                              resourceslices-policy-dra-driver-nvidia-gpu (a kubelet plugin may change only its own
                              node's ResourceSlices), bound with validationActions [Deny].
  chart/templates/kubeletplugin.yaml, controller.yaml, rbac-*.yaml  the DaemonSet (init container
                              kubelet-plugin-prestart.sh, containers compute-domains and gpus), the ComputeDomain
                              controller Deployment, their RBAC (the kubelet plugin Role may manage Deployments only
                              with the MPSSupport feature gate: the MPS control daemon).
  chart/crds/*.yaml           ComputeDomain and ComputeDomainClique CRDs (resource.nvidia.com/v1beta1).
  pkg/featuregates/featuregates.go  the driver's feature gates, their defaults and ValidateFeatureGates' rules.
  api/nvidia.com/resource/v1beta1/{api,gpuconfig,sharing,validate}.go  the claim's opaque config: GpuConfig /
                              MigDeviceConfig, sharing strategies TimeSlicing (needs TimeSlicingSettings) and MPS
                              (needs MPSSupport), intervals Default/Short/Medium/Long.
  cmd/gpu-kubelet-plugin/{main,driver,nvlib,deviceinfo,mig,partitions,types}.go  driver name gpu.nvidia.com; one
                              pool named after the node, one ResourceSlice with every device; a GPU without MIG is
                              device gpu-<minor> (type gpu); a GPU in MIG mode is not published, each of its MIG
                              devices is gpu-<minor>-mig-<profile>-<profile id>-<start> (type mig, parentUUID).
  vendor/k8s.io/dynamic-resource-allocation/kubeletplugin/draplugin.go  registration socket
                              /var/lib/kubelet/plugins_registry/<driver>-reg.sock; client/client.go falls back from
                              resource.k8s.io/v1 to v1beta2 and v1beta1, so the driver runs on 1.32 and 1.33.
  docs/prerequisites.md       CDI enabled in the container runtime; on 1.32 and 1.33 the DynamicResourceAllocation
                              feature gate on kube-apiserver, kube-controller-manager, kube-scheduler and kubelet, and
                              --runtime-config resource.k8s.io/v1beta1=true (1.33: also v1beta2) on kube-apiserver.

Kubernetes facts: DRA with structured parameters (KEP-4381) is resource.k8s.io/v1alpha3 in 1.31 (alpha, off),
v1beta1 from 1.32, v1beta2 from 1.33 (beta APIs, off by default), v1 from 1.34 (GA, on by default); the OpenAPI
documents of each release (kubernetes-validate's schemas) list exactly these DeviceClass versions. KEP-5004
(kubernetes/enhancements keps/sig-scheduling/5004-dra-extended-resource/kep.yaml): DeviceClass
spec.extendedResourceName behind the DRAExtendedResource gate, alpha in 1.34, beta (on by default) in 1.36, GA in
1.37, on kube-apiserver, kube-scheduler and kubelet (the chart's note adds kube-controller-manager).
"""

import re

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.api import json_answer
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.version import kubernetes_minor

RELEASE = "v0.4.1"
COMMIT = "764900e7833798a1528bd52a2af3e1b2d5f7a616"
REPOSITORY = "https://github.com/kubernetes-sigs/dra-driver-nvidia-gpu"
IMAGE = "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:" + RELEASE
NAME = "dra-driver-nvidia-gpu"
SERVICE_ACCOUNT = NAME + "-service-account"
GPU_DRIVER = "gpu.nvidia.com"
CD_DRIVER = "compute-domain.nvidia.com"
KUBELET_REGISTRY = "/var/lib/kubelet/plugins_registry"
KUBELET_PLUGINS = "/var/lib/kubelet/plugins"
CDI_ROOT = "/var/run/cdi"
POLICY = "resourceslices-policy-" + NAME
# This project's node label for the stack's GPU nodes (the chart selects on Node Feature Discovery labels instead).
NODE_LABELS = {"kube-gpu-nodes.io/nvidia-dra": "true"}
RESOURCE_GROUP = "resource.k8s.io"

OLDEST_MINOR = 32
GA_MINOR = 34
# The resource.k8s.io versions of each beta minor, the one rendered first (what docs/prerequisites.md enables).
BETA_VERSIONS = {32: ("v1beta1",), 33: ("v1beta2", "v1beta1")}
RUNTIME_CONFIG = {32: "resource.k8s.io/v1beta1=true", 33: "resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta2=true"}
FEATURE_GATE = "DynamicResourceAllocation"
GATE_COMPONENTS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet")

# KEP-5004: DeviceClass.spec.extendedResourceName (resource.k8s.io/v1 only), on by default from 1.36.
EXTENDED_RESOURCE = "nvidia.com/gpu"
EXTENDED_GATE = "DRAExtendedResource"
EXTENDED_FIRST_MINOR = 34
EXTENDED_DEFAULT_MINOR = 36

# (name, part, CEL selector) verbatim from chart/templates/deviceclass-*.yaml; part: gpus or compute_domains.
DEVICE_CLASSES = (
    ("gpu.nvidia.com", "gpus",
     "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"),
    ("mig.nvidia.com", "gpus",
     "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"),
    ("vfio.gpu.nvidia.com", "gpus",
     "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'vfio'"),
    ("compute-domain-daemon.nvidia.com", "compute_domains",
     "device.driver == 'compute-domain.nvidia.com' && device.attributes['compute-domain.nvidia.com'].type == 'daemon'"),
    ("compute-domain-default-channel.nvidia.com", "compute_domains",
     "device.driver == 'compute-domain.nvidia.com' && device.attributes['compute-domain.nvidia.com'].type == 'channel' "
     "&& device.attributes['compute-domain.nvidia.com'].id == 0"),
)

# pkg/featuregates/featuregates.go: gate -> default.
FEATURE_GATES = {
    "TimeSlicingSettings": False, "MPSSupport": False, "IMEXDaemonsWithDNSNames": True, "PassthroughSupport": False,
    "NVMLDeviceHealthCheck": False, "DynamicMIG": False, "ComputeDomainCliques": True,
    "CrashOnNVLinkFabricErrors": True, "DeviceMetadata": False,
}
# Gates whose effect this project does not deploy (why, and what to use instead).
NOT_OFFERED = {
    "PassthroughSupport": "it needs the host's root, /sys and /proc mounted into the kubelet plugin for vfio-pci "
                          "passthrough; use the upstream chart for passthrough nodes",
    "DeviceMetadata": "it requires PassthroughSupport",
    "DynamicMIG": "the kubelet plugin would create and destroy MIG devices itself, while this project sets MIG "
                  "layouts with nvidia_mig_layout; keep one owner of the MIG layout",
}
# ValidateFeatureGates: (gate, other, "requires" or "excludes").
_GATE_RULES = (
    ("ComputeDomainCliques", "IMEXDaemonsWithDNSNames", "requires"),
    ("DynamicMIG", "PassthroughSupport", "excludes"),
    ("DynamicMIG", "NVMLDeviceHealthCheck", "excludes"),
    ("DynamicMIG", "MPSSupport", "excludes"),
    ("PassthroughSupport", "NVMLDeviceHealthCheck", "excludes"),
    ("DeviceMetadata", "PassthroughSupport", "requires"),
)
# The claim's opaque config (api/nvidia.com/resource/v1beta1): group version, kinds, time-slice intervals.
CONFIG_API = "resource.nvidia.com/v1beta1"
TIME_SLICE_INTERVALS = ("Default", "Short", "Medium", "Long")


def _minor(kubernetes_version):
    return kubernetes_minor(kubernetes_version, "gpu_sharing_stacks_kubernetes_version", newest=False)


def _gates_text(minor):
    return (f"turn on the {FEATURE_GATE} feature gate (--feature-gates={FEATURE_GATE}=true) on "
            f"{', '.join(GATE_COMPONENTS)}, and --runtime-config={RUNTIME_CONFIG[minor]} on kube-apiserver")


def kubernetes_problems(kubernetes_version):
    """Why the Kubernetes version cannot run the stack at all ([] when it can, or when the version is not one at all:
    the inventory contract reports that)."""
    try:
        minor = _minor(kubernetes_version)
    except KgnError:
        return []
    if minor >= OLDEST_MINOR:
        return []
    return [f"nvidia_dra needs Kubernetes 1.{OLDEST_MINOR} or newer, but kubernetes_version is {kubernetes_version}: "
            f"Dynamic Resource Allocation with structured parameters was alpha before 1.32 (resource.k8s.io/v1alpha3 "
            f"in 1.31, off by default, with another API than the one DRA drivers publish to), and NVIDIA's DRA driver "
            f"{RELEASE} supports 1.32 and newer (its chart's kubeVersion >=1.32.0-0). Upgrade the cluster to 1.34 or "
            f"newer (DRA is GA and on by default there), or keep nvidia_device_plugin for this cluster"]


def resource_api(kubernetes_version, served=None, override=""):
    """The resource.k8s.io version the stack's objects use, for a Kubernetes version and what the API server
    serves: ``{api_version, version, stage, assumed}``.

    ``served``: the versions of resource.k8s.io the API server's discovery lists (``[]`` when it serves none),
    or None when it was not read (a render): then the version is chosen from the Kubernetes version alone and
    ``assumed`` says so. ``override``: gpu_sharing_stacks_dra_resource_api, "" or a version the minor has
    (the chart's resourceApiVersion). Refused (KgnError) before 1.32; on 1.32-1.33 when the chosen beta version is
    not served (naming the feature gate and runtime-config to turn on, and on which components); from 1.34 when
    the API server does not serve resource.k8s.io/v1 (DRA turned off).
    """
    minor = _minor(kubernetes_version)
    problems = kubernetes_problems(kubernetes_version)
    if problems:
        raise KgnError(problems[0] + ". Nothing was changed.")
    known = ("v1", "v1beta2", "v1beta1") if minor >= GA_MINOR else BETA_VERSIONS[minor]
    override = (override or "").strip()
    if override:
        wanted = override.split("/", 1)[1] if override.startswith(RESOURCE_GROUP + "/") else override
        if wanted not in known:
            raise KgnError(f"gpu_sharing_stacks_dra_resource_api is {override!r}, but Kubernetes 1.{minor} has "
                           f"{', '.join(RESOURCE_GROUP + '/' + v for v in known)}; set one of them, or \"\" for the "
                           f"version this project picks. Nothing was changed.")
    else:
        wanted = known[0]
    if served is not None and not isinstance(served, (list, tuple)):
        raise KgnError(f"resource_api: served must be the list of resource.k8s.io versions the API server serves, "
                       f"got {served!r}")
    stage = "GA" if wanted == "v1" else "beta"
    result = {"api_version": f"{RESOURCE_GROUP}/{wanted}", "version": wanted, "stage": stage, "assumed": ""}
    if served is None:
        if minor < GA_MINOR:
            result["assumed"] = (f"the API server's discovery was not read: rendered for {RESOURCE_GROUP}/{wanted}, "
                                 f"which Kubernetes 1.{minor} serves only when turned on ({_gates_text(minor)}); a run "
                                 f"refuses when the cluster does not serve it")
        return result
    if wanted in served:
        return result
    listed = ", ".join(RESOURCE_GROUP + "/" + v for v in served) or "no version of it"
    if minor >= GA_MINOR:
        raise KgnError(
            f"nvidia_dra: Kubernetes 1.{minor} serves {RESOURCE_GROUP}/v1 (Dynamic Resource Allocation is GA and on by "
            f"default since 1.34), but this API server lists {listed}: DRA was turned off. Remove "
            f"{FEATURE_GATE}=false from --feature-gates of {', '.join(GATE_COMPONENTS)} and {RESOURCE_GROUP}/v1=false "
            f"from kube-apiserver's --runtime-config (managed clusters: the provider's DRA setting), or leave "
            f"nvidia_dra out of gpu_sharing_stacks. Nothing was changed.")
    usable = [v for v in known if v in served]
    also = (f" It does serve {', '.join(RESOURCE_GROUP + '/' + v for v in usable)}: set "
            f"gpu_sharing_stacks_dra_resource_api to it to render for that version instead." if usable else "")
    raise KgnError(
        f"nvidia_dra on Kubernetes 1.{minor} needs the beta API {RESOURCE_GROUP}/{wanted}, which this API server does "
        f"not serve (it lists {listed}): Dynamic Resource Allocation is beta and off by default in 1.32 and 1.33. "
        f"To use it, {_gates_text(minor)} (NVIDIA's DRA driver docs/prerequisites.md; managed clusters: the "
        f"provider's setting), then run again; or upgrade to 1.34+, where it is on by default; or leave nvidia_dra "
        f"out of gpu_sharing_stacks.{also} Nothing was changed.")


def served_groups(answer):
    """``{group: [versions]}`` of the API server's ``/apis`` discovery document (an APIGroupList, text or parsed).
    The one place that reads discovery's shape; k8s_manifests fetches the document."""
    answer = json_answer(answer, "the API server's /apis", "groups", "an APIGroupList")
    served = {}
    for group in answer["groups"]:
        if not isinstance(group, dict) or not group.get("name"):
            continue
        served[str(group["name"])] = [str(v.get("version")) for v in group.get("versions") or []
                                      if isinstance(v, dict) and v.get("version")]
    return served


def extended_resource(kubernetes_version, setting="auto", api_version=""):
    """Whether the gpu.nvidia.com DeviceClass maps the extended resource nvidia.com/gpu (KEP-5004: pods that ask for
    nvidia.com/gpu in their limits get a generated ResourceClaim): ``{enabled, resource, why}``.

    ``setting`` (gpu_sharing_stacks_dra_extended_resource): auto = where the DRAExtendedResource gate is on by
    default (1.36+); true = also 1.34-1.35, where the cluster's admin turned the gate on; false = never. The field
    exists only in resource.k8s.io/v1 (1.34+); an API server with the gate off drops it, so kubectl apply would
    report a change on every run: that is why auto leaves it off where the gate is off by default."""
    minor = _minor(kubernetes_version)
    if isinstance(setting, str) and setting.lower() in ("true", "false"):
        setting = setting.lower() == "true"
    if setting not in ("auto", True, False):
        raise KgnError(f"gpu_sharing_stacks_dra_extended_resource must be auto, true or false, got {setting!r}. "
                       f"Nothing was changed.")
    v1 = minor >= EXTENDED_FIRST_MINOR and api_version in ("", RESOURCE_GROUP + "/v1")
    off = {"enabled": False, "resource": EXTENDED_RESOURCE}
    if setting is True and not v1:
        raise KgnError(
            f"gpu_sharing_stacks_dra_extended_resource is true, but DeviceClass.spec.extendedResourceName (KEP-5004) "
            f"exists only in {RESOURCE_GROUP}/v1, from Kubernetes 1.{EXTENDED_FIRST_MINOR} (this cluster: "
            f"{kubernetes_version}, {api_version or 'resource API not chosen'}). Set it to auto or false, or upgrade. "
            f"Nothing was changed.")
    if setting is False:
        return dict(off, why="gpu_sharing_stacks_dra_extended_resource is false")
    if setting == "auto" and (not v1 or minor < EXTENDED_DEFAULT_MINOR):
        why = (f"{EXTENDED_GATE} is off by default before 1.{EXTENDED_DEFAULT_MINOR} (alpha from 1.34); set "
               f"gpu_sharing_stacks_dra_extended_resource: true once it is on in kube-apiserver, kube-scheduler, "
               f"kube-controller-manager and kubelet" if minor >= EXTENDED_FIRST_MINOR
               else f"{EXTENDED_GATE} needs Kubernetes 1.{EXTENDED_FIRST_MINOR}+ and {RESOURCE_GROUP}/v1")
        return dict(off, why=why)
    return {"enabled": True, "resource": EXTENDED_RESOURCE,
            "why": (f"{EXTENDED_GATE} is on by default from 1.{EXTENDED_DEFAULT_MINOR}" if setting == "auto"
                    else "gpu_sharing_stacks_dra_extended_resource is true (the gate is on in the cluster)")}


def driver_feature_gates(gates):
    """The driver's feature gates as set in gpu_sharing_stacks_dra_feature_gates, validated: ``{set, effective,
    env}``; ``env`` is the FEATURE_GATES value the chart renders (sorted ``Key=value,`` pairs), "" when none is set.
    Refused: an unknown gate, a non-boolean value, a gate this project does not offer, and the combinations
    ValidateFeatureGates rejects."""
    if gates in (None, ""):
        gates = {}
    if not isinstance(gates, dict):
        raise KgnError(f"gpu_sharing_stacks_dra_feature_gates must be a mapping gate -> true/false, got {gates!r}. "
                       f"Nothing was changed.")
    problems = []
    values = {}
    for name, value in sorted(gates.items()):
        if name not in FEATURE_GATES:
            problems.append(f"{name} is not a feature gate of the DRA driver {RELEASE} (known: "
                            f"{', '.join(sorted(FEATURE_GATES))})")
            continue
        if isinstance(value, str) and value.lower() in ("true", "false"):
            value = value.lower() == "true"
        if not isinstance(value, bool):
            problems.append(f"{name} must be true or false, got {value!r}")
            continue
        if value and name in NOT_OFFERED:
            problems.append(f"{name} is not offered by kube-gpu-nodes: {NOT_OFFERED[name]}")
            continue
        values[name] = value
    effective = dict(FEATURE_GATES, **values)
    for gate, other, rule in _GATE_RULES:
        if effective[gate] and rule == "requires" and not effective[other]:
            problems.append(f"{gate} requires {other} (the driver refuses to start otherwise)")
        if effective[gate] and rule == "excludes" and effective[other]:
            problems.append(f"{gate} and {other} cannot both be on (the driver refuses to start otherwise)")
    if problems:
        raise KgnError("gpu_sharing_stacks_dra_feature_gates: " + "; ".join(problems) + ". Nothing was changed.")
    env = "".join(f"{k}={'true' if v else 'false'}," for k, v in sorted(values.items()))
    return {"set": values, "effective": effective, "env": env}


def device_classes(api_version, compute_domains=True, extended=None):
    """The DeviceClasses of the release: ``[{name, part, spec}]``, in the chart's order, the gpu.nvidia.com class
    with ``extendedResourceName`` when ``extended`` (extended_resource's answer) is enabled."""
    classes = []
    for name, part, cel in DEVICE_CLASSES:
        if part == "compute_domains" and not compute_domains:
            continue
        spec = {"selectors": [{"cel": {"expression": cel}}]}
        if name == GPU_DRIVER and (extended or {}).get("enabled"):
            if api_version != RESOURCE_GROUP + "/v1":
                raise KgnError(f"device_classes: extendedResourceName needs {RESOURCE_GROUP}/v1, not {api_version}")
            spec["extendedResourceName"] = extended["resource"]
        classes.append({"name": name, "part": part, "spec": spec})
    return classes


def device_request(api_version, name, device_class, selectors=(), count=1):
    """One request of a ResourceClaim(Template) spec in the shape of its API version: v1beta1 puts deviceClassName
    on the request, v1beta2 and v1 under ``exactly``."""
    body = {"deviceClassName": device_class}
    if selectors:
        body["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    if count != 1:
        body.update(allocationMode="ExactCount", count=count)
    if api_version == RESOURCE_GROUP + "/v1beta1":
        return dict({"name": name}, **body)
    if api_version in (RESOURCE_GROUP + "/v1beta2", RESOURCE_GROUP + "/v1"):
        return {"name": name, "exactly": body}
    raise KgnError(f"device_request: {api_version!r} is not a resource.k8s.io version this project renders")


def _opaque(requests, kind, sharing):
    return {"requests": list(requests), "opaque": {"driver": GPU_DRIVER, "parameters": {
        "apiVersion": CONFIG_API, "kind": kind, "sharing": sharing}}}


def mig_profiles(layouts):
    """The MIG profiles the GPU nodes' nvidia_mig_layout values name (sorted), and whether some layout enables MIG
    without naming its profiles (all-enabled, all-balanced: per GPU model): ``{profiles, unnamed}``."""
    profiles, unnamed = set(), False
    for layout in layouts or []:
        if isinstance(layout, str):
            if layout in ("", "all-disabled"):
                continue
            if layout in ("all-enabled", "all-balanced"):
                unnamed = True
                continue
            profile = layout[4:] if layout.startswith("all-") else layout
            profiles.add(profile[:-3] + "+me" if profile.endswith(".me") else profile)
        elif isinstance(layout, list):
            for entry in layout:
                if isinstance(entry, dict):
                    profiles.update(str(p) for p in entry.get("profiles") or [])
    return {"profiles": sorted(profiles), "unnamed": unnamed}


def _sample_name(text):
    return re.sub(r"[^a-z0-9-]", "-", text.lower()).strip("-")


def _shared_gpu_sample(api_version, name, what, prefix, sharing):
    """A sample whose two containers share one GPU (``sharing``: the GpuConfig's strategy and its settings)."""
    request = f"{prefix}-gpu"
    return {"name": name, "what": what,
            "claim_spec": {"devices": {"requests": [device_request(api_version, request, "gpu.nvidia.com")],
                                       "config": [_opaque([request], "GpuConfig", sharing)]}},
            "containers": [{"name": f"{prefix}-ctr{i}", "request": request} for i in (0, 1)]}


def sample_claims(api_version, gates=None, mig=None, extended=None):
    """The sample ResourceClaimTemplates and the pods that use them, as data the samples template renders:
    ``{claims: [{name, what, claim_spec, containers: [{name, request}]}], extended_pod}``.

    Always: one whole GPU. MIG: one per profile the layouts name (``mig``, mig_profiles' answer), or one "any MIG
    device" when they enable MIG without naming profiles. Time-slicing and MPS through the claim's opaque GpuConfig:
    only when the driver's TimeSlicingSettings / MPSSupport gate is on (``gates``: driver_feature_gates' answer),
    since the driver refuses those strategies otherwise (validate.go). Two containers share the claim. Extended
    resource: a pod that asks for nvidia.com/gpu in its limits, without a claim, when ``extended`` is enabled."""
    effective = (gates or {}).get("effective") or FEATURE_GATES
    samples = [{"name": "dra-gpu", "what": "one whole GPU (DeviceClass gpu.nvidia.com)",
                "claim_spec": {"devices": {"requests": [device_request(api_version, "gpu", "gpu.nvidia.com")]}},
                "containers": [{"name": "ctr", "request": "gpu"}]}]
    mig = mig or {"profiles": [], "unnamed": False}
    for profile in mig["profiles"]:
        selector = f"device.attributes['gpu.nvidia.com'].profile == '{profile}'"
        samples.append({
            "name": "dra-mig-" + _sample_name(profile),
            "what": f"one MIG device of profile {profile} (DeviceClass mig.nvidia.com)",
            "claim_spec": {"devices": {"requests": [device_request(api_version, "mig", "mig.nvidia.com", [selector])]}},
            "containers": [{"name": "ctr", "request": "mig"}]})
    if mig["unnamed"]:
        samples.append({"name": "dra-mig", "what": "one MIG device of any profile (DeviceClass mig.nvidia.com)",
                        "claim_spec": {"devices": {"requests": [device_request(api_version, "mig", "mig.nvidia.com")]}},
                        "containers": [{"name": "ctr", "request": "mig"}]})
    if effective.get("TimeSlicingSettings"):
        samples.append(_shared_gpu_sample(
            api_version, "dra-time-slicing", "one GPU time-sliced between two containers (GpuConfig TimeSlicing)",
            "ts", {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Default"}}))
    if effective.get("MPSSupport"):
        samples.append(_shared_gpu_sample(
            api_version, "dra-mps", "one GPU shared by two containers through MPS (GpuConfig MPS)",
            "mps", {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 50}}))
    extended_pod = bool((extended or {}).get("enabled"))
    return {"claims": samples, "extended_pod": extended_pod}


# --------------------------------------------------------------------------------------------------
# The node: CDI and conflicts (validate play, before any host changes)

def cdi_problems(node, runtime_mode):
    """The refusal for a DRA node whose runtime will not have CDI on (``runtime_mode``: cdi, legacy, or None when
    unknown: nothing refused)."""
    if runtime_mode != "legacy":
        return []
    return [f"{node}: nvidia_dra needs CDI (the Container Device Interface) in the node's container runtime: the DRA "
            f"kubelet plugin hands each container its GPUs as CDI devices written to {CDI_ROOT} (NVIDIA's DRA driver "
            f"docs/prerequisites.md), but this node's runtime mode is legacy. Set nvidia_container_runtime_mode to "
            f"cdi or auto, on containerd 1.7 or newer, CRI-O, or Docker 25 or newer with NVIDIA container toolkit "
            f"1.14 or newer; or keep nvidia_device_plugin on this node"]


# Stacks that run a device plugin handing out the node's GPUs (every stack of the catalog but nvidia_dra).
def conflict_problems(node, stacks):
    """The refusal for nvidia_dra together with a device plugin stack on one node, naming both and the way out."""
    stacks = list(stacks or [])
    if "nvidia_dra" not in stacks:
        return []
    others = [s for s in stacks if s != "nvidia_dra"]
    if not others:
        return []
    return [f"{node}: nvidia_dra and {' and '.join(others)} would both hand out this node's GPUs (the DRA kubelet "
            f"plugin publishes every GPU in a ResourceSlice, and {others[0]}'s device plugin advertises them too; "
            f"NVIDIA's chart refuses the same: \"cannot be deployed alongside the standard GPU device plugin on the "
            f"same node\"), "
            f"so one GPU could go to two pods. Give the node one of them: to move it to DRA, set gpu_sharing_stacks: "
            f"[nvidia_dra] for it in host_vars and run playbooks/nvidia_dra_switch.yml -l {node} (cordon, drain the "
            f"pods that hold GPUs, switch, verify, uncordon); other nodes may keep {others[0]}"]


def node_problems(node, stacks, kubernetes_version, runtime_mode):
    """What the inventory alone says against nvidia_dra on one GPU node besides the stack conflicts (which
    stacks.stack_problems reports through conflict_problems): the Kubernetes version and CDI ([] when fine or not
    chosen)."""
    if "nvidia_dra" not in (stacks or []):
        return []
    return [f"{node}: {p}" for p in kubernetes_problems(kubernetes_version)] + cdi_problems(node, runtime_mode)


# --------------------------------------------------------------------------------------------------
# Moving a node from the device plugin to DRA

SWITCH_STEPS = ("cordon", "drain", "switch", "wait", "verify", "uncordon")


def switch_plan(node, before, after, gpu_pods=(), cluster_stacks=()):
    """The per-node switch from a device plugin stack to nvidia_dra: ``{node, steps, drain, gpu_pods, remove,
    add}``. ``before``/``after``: the node's stacks now (what its labels say) and wanted; ``gpu_pods``: the
    node's pods that hold GPUs (mig.mig_gpu_pods); ``cluster_stacks``: the control plane's gpu_sharing_stacks
    (the DRA objects must be deployed before a node moves to them). The steps are cordon, drain (only when pods
    hold GPUs: they would keep GPUs the DRA driver hands out again), switch (the node labels), wait (the device
    plugin has left the node, the DRA kubelet plugin has published the node's GPUs), verify, uncordon. Refused when
    it is no such move."""
    before, after = list(before or []), list(after or [])
    if "nvidia_dra" not in after:
        raise KgnError(f"{node}: the switch moves a node to nvidia_dra, but its wanted stacks are {after or '[]'}; set "
                       f"gpu_sharing_stacks: [nvidia_dra] for it. Nothing was changed.")
    if len(after) > 1:
        raise KgnError(" ".join(conflict_problems(node, after)) + ". Nothing was changed.")
    if "nvidia_dra" in before and len(before) == 1:
        return {"node": node, "steps": ["verify"], "drain": False, "gpu_pods": list(gpu_pods), "remove": [],
                "add": [], "done": True}
    if "nvidia_dra" not in (cluster_stacks or []):
        raise KgnError(f"{node}: nvidia_dra is not deployed in the cluster (the control plane's gpu_sharing_stacks is "
                       f"{list(cluster_stacks or [])}); add nvidia_dra there and run playbooks/gpu_sharing_stacks.yml "
                       f"first, so the DRA kubelet plugin can start on the node once it is switched. Nothing was "
                       f"changed.")
    drain = bool(gpu_pods)
    steps = [s for s in SWITCH_STEPS if s != "drain" or drain]
    return {"node": node, "steps": steps, "drain": drain, "gpu_pods": sorted(gpu_pods),
            "remove": [s for s in before if s != "nvidia_dra"], "add": ["nvidia_dra"], "done": False}


# --------------------------------------------------------------------------------------------------
# What the kubelet plugin publishes, checked against the node's GPUs (verify)

def _items(answer):
    import json

    if isinstance(answer, str):
        try:
            answer = json.loads(answer or "{}")
        except ValueError as err:
            raise KgnError(f"kubectl get resourceslices did not answer JSON ({err})") from None
    if isinstance(answer, dict):
        answer = answer.get("items")
    if not isinstance(answer, list):
        raise KgnError("resource slices must be a list of ResourceSlice objects (or a List with items)")
    return answer


def _device_fields(device):
    """Attributes of a published device in every API version (v1beta1 nests them under ``basic``)."""
    body = device.get("basic") if isinstance(device.get("basic"), dict) else device
    attrs = {}
    for key, value in (body.get("attributes") or {}).items():
        if isinstance(value, dict):
            value = next((value[k] for k in ("string", "version", "int", "bool") if k in value), None)
        attrs[key.split("/", 1)[1] if key.startswith(GPU_DRIVER + "/") else key] = value
    return attrs


def published_devices(slices, node_name):
    """The gpu.nvidia.com devices published for ``node_name`` (every ResourceSlice of the node's pool, current
    generation): ``{devices: [{name, type, uuid, parent_uuid, profile}], slices, problems}``."""
    mine = [s for s in _items(slices) if (s.get("spec") or {}).get("driver") == GPU_DRIVER
            and (s.get("spec") or {}).get("nodeName") == node_name]
    problems = []
    if not mine:
        return {"devices": [], "slices": 0, "problems": []}
    generation = max(int(((s["spec"].get("pool") or {}).get("generation")) or 0) for s in mine)
    current = [s for s in mine if int(((s["spec"].get("pool") or {}).get("generation")) or 0) == generation]
    expected = {int(((s["spec"].get("pool") or {}).get("resourceSliceCount")) or 1) for s in current}
    if len(expected) != 1 or len(current) != expected.pop():
        problems.append(f"the pool of {node_name} has {len(current)} ResourceSlice(s) of generation {generation}, not "
                        f"the resourceSliceCount they state: the kubelet plugin is still publishing, or failed to")
    devices = []
    for s in current:
        for device in s["spec"].get("devices") or []:
            attrs = _device_fields(device)
            devices.append({"name": device.get("name"), "type": attrs.get("type"), "uuid": attrs.get("uuid"),
                            "parent_uuid": attrs.get("parentUUID"), "profile": attrs.get("profile")})
    return {"devices": devices, "slices": len(current), "problems": problems}


def slice_problems(slices, node_name, gpu_facts):
    """Whether the node's ResourceSlices publish one device per GPU or MIG device the node has ([] when they do).

    ``slices``: ``kubectl get resourceslices -o json`` (text, List or list); ``gpu_facts``: the gpu_facts module's
    answer for the node (uuid, mig_mode_current, mig_device_count per GPU). A GPU without MIG must be one device of
    type gpu with its UUID; a GPU in MIG mode must not be published itself, and must have as many devices of type mig
    with its UUID as parentUUID as it has MIG devices (cmd/gpu-kubelet-plugin/nvlib.go)."""
    gpus = (gpu_facts or {}).get("gpus") or []
    found = published_devices(slices, node_name)
    if not found["slices"]:
        return [f"no ResourceSlice of driver {GPU_DRIVER} is published for node {node_name}: the DRA kubelet plugin "
                f"does not run there, or is not registered with the kubelet"] if gpus else []
    problems = list(found["problems"])
    devices = found["devices"]
    seen = set()
    for gpu in gpus:
        uuid = gpu.get("uuid")
        label = f"GPU {gpu.get('index')} ({uuid or 'no UUID'})"
        whole = [d for d in devices if d["type"] == "gpu" and d["uuid"] == uuid]
        migs = [d for d in devices if d["type"] == "mig" and d["parent_uuid"] == uuid]
        seen.update(id(d) for d in whole + migs)
        if str(gpu.get("mig_mode_current")) == "Enabled":
            if whole:
                problems.append(f"{label} is in MIG mode but is published as a whole GPU ({whole[0]['name']})")
            count = int(gpu.get("mig_device_count") or 0)
            if len(migs) != count:
                problems.append(f"{label} has {count} MIG device(s), the ResourceSlice publishes {len(migs)}"
                                + (f" ({', '.join(d['name'] for d in migs)})" if migs else ""))
        elif len(whole) != 1:
            problems.append(f"{label} is published {len(whole)} time(s) as a whole GPU (expected once)")
    extra = [d["name"] for d in devices if id(d) not in seen]
    if extra:
        problems.append(f"the ResourceSlice publishes device(s) that are not a GPU or MIG device nvidia-smi lists on "
                        f"{node_name}: {', '.join(str(e) for e in extra)}")
    return problems


def device_class_problems(answer, api_version, compute_domains=True, extended=None):
    """Whether the release's DeviceClasses exist as planned (``answer``: ``kubectl get deviceclasses -o json``)."""
    listed = {(o.get("metadata") or {}).get("name"): o for o in _items(answer)}
    problems = []
    for wanted in device_classes(api_version, compute_domains, extended):
        found = listed.get(wanted["name"])
        if found is None:
            problems.append(f"DeviceClass {wanted['name']} does not exist")
            continue
        cel = [((s or {}).get("cel") or {}).get("expression") for s in (found.get("spec") or {}).get("selectors") or []]
        if cel != [wanted["spec"]["selectors"][0]["cel"]["expression"]]:
            problems.append(f"DeviceClass {wanted['name']} selects {cel}, not the release's selector")
    return problems


def registration_problems(entries, compute_domains=True):
    """Whether the kubelet plugin registered with the kubelet: ``entries`` are the names in
    /var/lib/kubelet/plugins_registry (the registration sockets, <driver>-reg.sock)."""
    wanted = [GPU_DRIVER] + ([CD_DRIVER] if compute_domains else [])
    names = set(entries or [])
    return [f"{KUBELET_REGISTRY}/{driver}-reg.sock is missing: the DRA kubelet plugin for {driver} is not registered "
            f"with the kubelet" for driver in wanted if f"{driver}-reg.sock" not in names]


def allocatable_problems(node_name, allocatable):
    """A DRA node must not also advertise nvidia.com/gpu through a device plugin (``allocatable``: the Node's
    status.allocatable): then two components hand out its GPUs."""
    value = str((allocatable or {}).get(EXTENDED_RESOURCE, "0"))
    if value in ("", "0"):
        return []
    return [f"node {node_name} advertises {EXTENDED_RESOURCE}: {value} from a device plugin while the DRA kubelet "
            f"plugin hands out its GPUs; remove the device plugin from the node (playbooks/nvidia_dra_switch.yml moves "
            f"a node from nvidia_device_plugin to nvidia_dra)"]


def published_problems(answer, node_name, gpu_facts):
    """What the API shows against a DRA node (``answer``: ``kubectl get resourceslices,nodes -o json``): the
    slice checks (slice_problems) and, when the Node is in the answer, a device plugin still advertising
    nvidia.com/gpu on it (allocatable_problems). [] when the node is served by the DRA driver alone."""
    items = _items(answer)
    node = [o for o in items if o.get("kind") == "Node" and (o.get("metadata") or {}).get("name") == node_name]
    problems = slice_problems([o for o in items if o.get("kind") != "Node"], node_name, gpu_facts)
    for found in node:
        problems += allocatable_problems(node_name, (found.get("status") or {}).get("allocatable"))
    return problems


def dra_plan(p, served=None):
    """What the stacks plan and the templates need for nvidia_dra (``p``: the stacks inputs; ``served``: the
    versions of resource.k8s.io the API server lists, None when not read)."""
    api = resource_api(p["kubernetes_version"], served, p.get("dra_resource_api") or "")
    gates = driver_feature_gates(p.get("dra_feature_gates"))
    extended = extended_resource(p["kubernetes_version"], p.get("dra_extended_resource", "auto"), api["api_version"])
    compute_domains = p.get("dra_compute_domains", True)
    if isinstance(compute_domains, str) and compute_domains.lower() in ("true", "false"):
        compute_domains = compute_domains.lower() == "true"
    if not isinstance(compute_domains, bool):
        raise KgnError(f"gpu_sharing_stacks_dra_compute_domains must be true or false, got {compute_domains!r}. "
                       f"Nothing was changed.")
    hook = p.get("dra_cdi_hook_path") or ""
    if hook and not (isinstance(hook, str) and hook.startswith("/")):
        raise KgnError(f"gpu_sharing_stacks_dra_cdi_hook_path must be an absolute path on the nodes (or \"\" for the "
                       f"driver's own copy), got {hook!r}. Nothing was changed.")
    return {
        "enabled": True,
        "release": RELEASE,
        "commit": COMMIT,
        "name": NAME,
        "resource_api": api["api_version"],
        "stage": api["stage"],
        "assumed": api["assumed"],
        "extended": extended,
        "compute_domains": compute_domains,
        "feature_gates": gates["set"],
        "feature_gates_env": gates["env"],
        "mps": gates["effective"]["MPSSupport"],
        "cdi_hook_path": hook,
        "device_classes": device_classes(api["api_version"], compute_domains, extended),
        "samples": sample_claims(api["api_version"], gates, mig_profiles(p.get("dra_mig_layouts")), extended),
        "service_accounts": {"kubelet_plugin": SERVICE_ACCOUNT + "-kubeletplugin",
                             "controller": SERVICE_ACCOUNT + "-controller",
                             "policy_subject": SERVICE_ACCOUNT},
        "policy": POLICY,
        "node_labels": dict(NODE_LABELS),
        "paths": {"registry": KUBELET_REGISTRY, "plugins": KUBELET_PLUGINS, "cdi": CDI_ROOT},
    }
