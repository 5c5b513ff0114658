"""kube-scheduler config APIs: what each apiVersion has, and how an existing config is read and converted.

Pure Python, no Ansible imports; errors are ``SchedulerConfigError`` (a ``ValueError``) whose message the
filter passes on. Facts cite the source keys of docs/versions.md section A. The conversion rules are
documented in docs/scheduler-versions.md ("Merging with the existing config").
"""

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.scheduler.scheduler_extender import (
    ExtenderError,
    read_existing_extender,
)

GROUP = "kubescheduler.config.k8s.io"
POLICY_LAST_MINOR = 22  # Policy API and its flags removed in 1.23 [PR-105424]


class SchedulerConfigError(KgnError):
    """An existing config that cannot be read or converted to the target apiVersion."""


def _fail(message: str) -> SchedulerConfigError:
    return SchedulerConfigError(message)


# Served KubeSchedulerConfiguration versions: (first minor, last minor) of 1.x. [KS tags], A2/A2b and
# the "Observed" table (1.22.3: v1beta1+v1beta2; 1.25.16/1.27.16: v1beta2+v1beta3+v1; 1.29+: v1 only).
SERVED = {
    "v1alpha1": (12, 18),  # [KS-1.12], removed 1.19 (PR #89298)
    "v1alpha2": (18, 18),  # [KS-1.18], removed 1.19
    "v1beta1": (19, 22),  # [PR-91420], removed 1.23 (PR #104782)
    "v1beta2": (22, 27),  # [KEP-785], removed 1.28 (PR #117649)
    "v1beta3": (23, 28),  # [KEP-785], removed 1.29 (PR #119994)
    "v1": (25, 99),  # GA 1.25 [KEP-785]
}

# Top-level KubeSchedulerConfiguration fields per apiVersion (A4; [KS-1.18] [KS-1.19] [KS-1.22] [KS-1.23]
# [KS-1.25]). apiVersion/kind are handled separately.
_COMMON = (
    "leaderElection",
    "clientConnection",
    "enableProfiling",
    "enableContentionProfiling",
    "percentageOfNodesToScore",
    "podInitialBackoffSeconds",
    "podMaxBackoffSeconds",
    "profiles",
    "extenders",
)
TOP_LEVEL = {
    "v1alpha2": (*_COMMON, "healthzBindAddress", "metricsBindAddress", "disablePreemption", "bindTimeoutSeconds"),
    "v1beta1": (*_COMMON, "healthzBindAddress", "metricsBindAddress"),
    "v1beta2": (*_COMMON, "healthzBindAddress", "metricsBindAddress", "parallelism"),
    "v1beta3": (*_COMMON, "parallelism"),
    "v1": (*_COMMON, "parallelism"),
}
# Where a field went when an apiVersion dropped it ([PR-91420], [PR-92892], [KEP-785]).
MOVED = {
    "disablePreemption": "disable the DefaultPreemption postFilter plugin in each profile",
    "bindTimeoutSeconds": "set it as bindTimeoutSeconds in the VolumeBinding pluginConfig args",
    "hardPodAffinitySymmetricWeight": "set it as hardPodAffinityWeight in the InterPodAffinity pluginConfig args",
    "algorithmSource": "put the extenders of the referenced Policy file in 'extenders' instead",
    "schedulerName": "set it as profiles[].schedulerName",
}
# No effect from 1.23 and absent from v1beta3/v1 (CHANGELOG-1.23 #96345): dropped on conversion.
DROPPED_ON_UPGRADE = ("healthzBindAddress", "metricsBindAddress")

# Plugin names an apiVersion no longer knows (A4, [KEP-785], [WEB-SCHEDCFG]).
_V1BETA2_REMOVED = (
    "NodeLabel",
    "ServiceAffinity",
    "NodePreferAvoidPods",
    "NodeResourcesLeastAllocated",
    "NodeResourcesMostAllocated",
    "RequestedToCapacityRatio",
)
REMOVED_PLUGINS = {
    "v1alpha2": (),
    "v1beta1": (),
    "v1beta2": _V1BETA2_REMOVED,
    "v1beta3": _V1BETA2_REMOVED,
    "v1": (*_V1BETA2_REMOVED, "SelectorSpread"),
}
_POINTS = ("queueSort", "preFilter", "filter", "postFilter", "preScore", "score", "reserve", "permit")
EXTENSION_POINTS = {
    "v1alpha2": (*_POINTS[:3], *_POINTS[4:], "preBind", "bind", "postBind", "unreserve"),
    "v1beta1": (*_POINTS, "preBind", "bind", "postBind"),
    "v1beta2": (*_POINTS, "preBind", "bind", "postBind"),
    "v1beta3": (*_POINTS, "preBind", "bind", "postBind", "multiPoint"),  # multiPoint from v1beta3 [KS-1.23]
    "v1": (*_POINTS, "preBind", "bind", "postBind", "multiPoint"),
}
# Extension points added after an apiVersion came: point -> (apiVersions that have it, first minor). Read in
# config/<apiVersion>/types.go (type Plugins) of each kubernetes-1.X.0 tag of the kube-scheduler staging
# repository [KS tags]; 1.37 at kubernetes-1.37.0-beta.0 [KS-1.37].
POINTS_ADDED = {
    "preEnqueue": (("v1beta3", "v1"), 26),  # pod scheduling readiness [KS-1.26]
    "placementGenerate": (("v1",), 36),  # workload (pod group) placement [KS-1.36]
    "placementScore": (("v1",), 36),  # [KS-1.36]
    "podGroupPostFilter": (("v1",), 37),  # [KS-1.37]
}
PROFILE_PERCENTAGE_FIRST_MINOR = 26  # profiles[].percentageOfNodesToScore in v1 from 1.26 [KS-1.26]
# Top-level v1 fields added after 1.25, by the first minor that reads them.
V1_ADDED = {"delayCacheUntilActive": 28}  # [KS-1.28] (type KubeSchedulerConfiguration)

POLICY_TOP_LEVEL = ("kind", "apiVersion", "predicates", "priorities", "extenders", "hardPodAffinitySymmetricWeight",
                    "alwaysCheckAllPredicates")


def classify(doc: dict) -> str:
    """Classify an existing document: 'policy', 'v1alpha1', ... 'v1'; raise on anything else."""
    kind, api = doc.get("kind"), doc.get("apiVersion")
    if kind == "Policy" and api in ("v1", f"{GROUP}/v1"):
        return "policy"
    if kind == "KubeSchedulerConfiguration" and isinstance(api, str) and api.startswith(f"{GROUP}/"):
        suffix = api.split("/", 1)[1]
        if suffix in SERVED:
            return suffix
    raise _fail(
        f"scheduler_config: the existing config has kind {kind!r} and apiVersion {api!r}; expected a Policy "
        f"(apiVersion v1) or a KubeSchedulerConfiguration of {GROUP}/{{{', '.join(SERVED)}}}. Fix or remove the "
        "existing file"
    )


def existing_extenders(doc: dict, source: str) -> "list[dict]":
    entries = doc.get("extenders") or []
    if not isinstance(entries, list):
        raise _fail(f"scheduler_config: the existing config's 'extenders' is a {type(entries).__name__}, "
                    "expected a list")
    spelling = "policy" if source in ("policy", "v1alpha2") else "config"
    try:
        return [read_existing_extender(e, spelling, f"existing extenders[{i}]") for i, e in enumerate(entries)]
    except ExtenderError as err:
        raise _fail(f"scheduler_config: {err}") from None


def carry_policy(doc: dict) -> dict:
    """Top-level settings of an existing Policy carried into a Policy target."""
    carried = {}
    for key, value in doc.items():
        if key not in POLICY_TOP_LEVEL:
            raise _fail(f"scheduler_config: the existing Policy has the unknown top-level key {key!r} "
                        f"(kube-scheduler rejects it); allowed: {', '.join(POLICY_TOP_LEVEL)}")
        if key in ("predicates", "priorities") and value == []:
            what = "predicate" if key == "predicates" else "priority"
            raise _fail(f"scheduler_config: the existing Policy sets {key!r} to an empty list, which disables "
                        f"every default {what}; remove the key (keep the defaults) or list the ones you want")
        if key not in ("kind", "apiVersion", "extenders"):
            carried[key] = value
    return carried


def policy_to_config_settings(doc: dict, target: str) -> dict:
    """What of an existing Policy maps onto a KubeSchedulerConfiguration: only its extenders."""
    for key, value in doc.items():
        if key in ("kind", "apiVersion", "extenders"):
            continue
        if key == "alwaysCheckAllPredicates" and value is False:
            continue  # the default, nothing to carry
        if key == "hardPodAffinitySymmetricWeight" and value == 1:
            continue  # the default weight
        hint = MOVED.get(key, "express it as profile plugins (see docs/scheduler-versions.md)")
        raise _fail(
            f"scheduler_config: the existing Policy sets {key!r}, which has no equivalent in a "
            f"KubeSchedulerConfiguration {target} document; {hint}, then remove it from the Policy "
            "(extenders are carried over automatically)"
        )
    return {}


def _check_plugin_set(profile_name: str, point: str, plugin_set: object, target: str) -> None:
    if not isinstance(plugin_set, dict):
        return
    for state in ("enabled", "disabled"):
        for plugin in plugin_set.get(state) or []:
            name = plugin.get("name") if isinstance(plugin, dict) else None
            if name in REMOVED_PLUGINS[target]:
                raise _fail(
                    f"scheduler_config: profile {profile_name!r} lists plugin {name!r} under plugins.{point}."
                    f"{state}, but {GROUP}/{target} has no such plugin; remove it or replace it (e.g. "
                    "NodeResourcesFit scoringStrategy for the *Allocated/RequestedToCapacityRatio plugins)"
                )


def _convert_profiles(profiles: object, source: str, target: str, minor: int) -> list:
    """Carry profiles to the target apiVersion, failing on what the target cannot express."""
    if not isinstance(profiles, list):
        raise _fail(f"scheduler_config: the existing config's 'profiles' is a {type(profiles).__name__}, "
                    "expected a list")
    points = list(EXTENSION_POINTS[target]) + [point for point, (apis, first) in POINTS_ADDED.items()
                                               if target in apis and minor >= first]
    allowed = ["schedulerName", "plugins", "pluginConfig"]
    if target == "v1" and minor >= PROFILE_PERCENTAGE_FIRST_MINOR:
        allowed.append("percentageOfNodesToScore")
    converted = []
    for index, profile in enumerate(profiles):
        if not isinstance(profile, dict):
            raise _fail(f"scheduler_config: existing profiles[{index}] is not a mapping")
        name = profile.get("schedulerName", f"profiles[{index}]")
        for key in profile:
            if key not in allowed:
                raise _fail(
                    f"scheduler_config: profile {name!r} of the existing {source} config sets {key!r}, which "
                    f"{GROUP}/{target} on Kubernetes 1.{minor} does not have (allowed: {', '.join(allowed)}); "
                    "remove it from the existing config"
                )
        plugins = profile.get("plugins") or {}
        for point, plugin_set in plugins.items():
            if point not in points:
                raise _fail(
                    f"scheduler_config: profile {name!r} uses the extension point plugins.{point}, which "
                    f"{GROUP}/{target} on Kubernetes 1.{minor} does not have (allowed: {', '.join(points)})"
                )
            _check_plugin_set(name, point, plugin_set, target)
        new_profile = dict(profile)
        if "pluginConfig" in profile:
            new_config = []
            for entry in profile["pluginConfig"] or []:
                if isinstance(entry, dict) and entry.get("name") in REMOVED_PLUGINS[target]:
                    raise _fail(f"scheduler_config: profile {name!r} configures plugin {entry['name']!r}, which "
                                f"{GROUP}/{target} does not have; remove its pluginConfig entry")
                entry = dict(entry)
                args = entry.get("args")
                if isinstance(args, dict) and "apiVersion" in args:
                    entry["args"] = {**args, "apiVersion": f"{GROUP}/{target}"}
                new_config.append(entry)
            new_profile["pluginConfig"] = new_config
        converted.append(new_profile)
    return converted


def carry_config(doc: dict, source: str, target: str, minor: int) -> dict:
    """Top-level settings of an existing KubeSchedulerConfiguration carried into the target apiVersion."""
    if source == "v1alpha1":
        raise _fail(
            "scheduler_config: the existing config is KubeSchedulerConfiguration v1alpha1, whose extenders live "
            "in the Policy file named by algorithmSource.policy; pass that Policy document as 'existing' instead"
        )
    carried: dict = {}
    for key, value in doc.items():
        if key in ("apiVersion", "kind", "extenders") or value is None:
            continue  # a null field is the same as an absent one
        if key == "clientConnection" and not isinstance(value, dict):
            raise _fail(f"scheduler_config: the existing config's clientConnection is a {type(value).__name__}, "
                        "expected a mapping such as {kubeconfig: /etc/kubernetes/scheduler.conf}")
        if key == "profiles":
            carried[key] = _convert_profiles(value, source, target, minor)
        elif key in TOP_LEVEL[target] or (target == "v1" and minor >= V1_ADDED.get(key, 999)):
            carried[key] = value
        elif key in DROPPED_ON_UPGRADE:
            continue  # no effect since 1.23; serving is set by --bind-address/--secure-port
        else:
            hint = MOVED.get(key, "remove it from the existing config")
            raise _fail(
                f"scheduler_config: the existing {GROUP}/{source} config sets {key!r}, which {GROUP}/{target} "
                f"(the variant for Kubernetes 1.{minor}) does not have; {hint}"
            )
    return carried
