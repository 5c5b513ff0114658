"""kube-scheduler decisions: which config variant a Kubernetes version needs, and the document itself.

Filters (documentation in the sidecar ``<filter>.yml`` files):

- ``kgn_scheduler_variant``: format, apiVersion, flag, file, health endpoint, flags to remove.
- ``kgn_scheduler_config``: the complete config document (Policy or KubeSchedulerConfiguration) with the
  given extenders merged into an optional existing config.

Facts are cited by the source keys of ``../shared/reference/version-facts.md`` (section A). The extender
handling (neutral form, spellings per format, reading existing configs) lives in
``module_utils/kgn_scheduler_extender.py``.
"""

from __future__ import annotations

import os
import sys

from ansible.errors import AnsibleFilterError

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "module_utils"))
from kgn_scheduler_extender import (
    ExtenderError,
    check_single_binder,
    emit_extender,
    extender_from_neutral,
    read_existing_extender,
    same_url,
)
from kgn_version import VersionError, parse_version

GROUP = "kubescheduler.config.k8s.io"
SUPPORTED = ((1, 16), (1, 35))
POLICY_PATH = "/etc/kubernetes/scheduler-policy-config.json"
CONFIG_PATH = "/etc/kubernetes/scheduler-policy-config.yaml"

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
POLICY_LAST_MINOR = 22  # Policy API and its flags removed in 1.23 [PR-105424]

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
PREENQUEUE_FIRST_MINOR = 26  # preEnqueue extension point (pod scheduling readiness) in v1beta3/v1 from 1.26
PROFILE_PERCENTAGE_FIRST_MINOR = 26  # profiles[].percentageOfNodesToScore in v1 from 1.26 [KS-1.26]

POLICY_TOP_LEVEL = ("kind", "apiVersion", "predicates", "priorities", "extenders", "hardPodAffinitySymmetricWeight",
                    "alwaysCheckAllPredicates")
POLICY_FLAGS = ("--policy-config-file", "--policy-configmap", "--policy-configmap-namespace",
                "--use-legacy-policy-config")


def _plain(value: object) -> object:
    """Deep copy into plain Python types (no lazy/tagged container or string subclasses leak to Ansible)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    raise AnsibleFilterError(f"kgn_scheduler_config: cannot represent {value!r} ({type(value).__name__}) in a "
                             "scheduler config; use strings, numbers, booleans, lists and mappings")


def _fail(message: str) -> AnsibleFilterError:
    return AnsibleFilterError(message)


def _minor(kubernetes_version: object, filter_name: str) -> int:
    """Return the 1.x minor of a supported Kubernetes version, or raise AnsibleFilterError."""
    try:
        major, minor, _ = parse_version(kubernetes_version, f"{filter_name}: the Kubernetes version")
    except VersionError as err:
        raise _fail(str(err)) from None
    (lo_major, lo_minor), (hi_major, hi_minor) = SUPPORTED
    if (major, minor) < SUPPORTED[0] or (major, minor) > SUPPORTED[1]:
        raise _fail(
            f"{filter_name}: Kubernetes {kubernetes_version} (minor {major}.{minor}) is outside the supported range "
            f"{lo_major}.{lo_minor}-{hi_major}.{hi_minor}; set kubernetes_version to a release in that range"
        )
    return minor


def _target_api(minor: int) -> str:
    """apiVersion suffix generated for a minor (issue 3 item 2; A2b "recommended")."""
    if minor <= 18:
        return "policy"
    if minor <= 21:
        return "v1beta1"
    if minor == 22:
        return "v1beta2"  # do not combine with a Policy file (1.22 breakage, [ISS-105202])
    if minor <= 24:
        return "v1beta3"
    return "v1"


def _removed_flags(minor: int) -> tuple[list[str], dict[str, str]]:
    """Flags that must not be on the command line next to the generated config, with the reason for each."""
    notes: dict[str, str] = {}
    if minor <= 18:
        notes["--config"] = ("before 1.19 a --config file makes kube-scheduler ignore --policy-config-file "
                             "([ISS-87526])")
    elif minor <= POLICY_LAST_MINOR:
        for flag in POLICY_FLAGS:
            notes[flag] = ("overwrites the extenders of the --config file; 1.22 fails to start with v1beta2 plus a "
                           "Policy ([PR-92531], [ISS-105202])")
    else:
        for flag in POLICY_FLAGS:
            notes[flag] = "removed in 1.23 with the Policy API ([PR-105424])"
    if minor >= 24:
        for flag in ("--port", "--address"):
            notes[flag] = "insecure serving flags removed in 1.24 (#106865)"
    return list(notes), notes


def kgn_scheduler_variant(kubernetes_version: object) -> dict:
    """Describe the kube-scheduler config variant for a Kubernetes version."""
    minor = _minor(kubernetes_version, "kgn_scheduler_variant")
    api = _target_api(minor)
    removed, notes = _removed_flags(minor)
    policy = api == "policy"
    return {
        "kubernetes_minor": f"1.{minor}",
        "format": "policy" if policy else "kube_scheduler_configuration",
        "kind": "Policy" if policy else "KubeSchedulerConfiguration",
        "api_version": "v1" if policy else f"{GROUP}/{api}",
        "flag": "--policy-config-file" if policy else "--config",
        "path": POLICY_PATH if policy else CONFIG_PATH,
        "accepted_api_versions": [f"{GROUP}/{v}" for v, (lo, hi) in SERVED.items() if lo <= minor <= hi],
        "policy_file_accepted": minor <= POLICY_LAST_MINOR,
        # Secure serving 10259 is on by default from 1.13 and the only one from 1.23; kubeadm probes
        # https://127.0.0.1:10259/healthz ([PR-69663], [PR-85043], [KUBEADM-MANIFESTS], A5 health table).
        "health": {"scheme": "https", "port": 10259, "path": "/healthz"},
        "removed_flags": removed,
        "removed_flag_reasons": notes,
    }


# --------------------------------------------------------------------------------------------------------------
# Reading an existing config


def _api_suffix(doc: dict) -> str:
    """Classify an existing document: 'policy', 'v1alpha1', ... 'v1'; raise on anything else."""
    kind, api = doc.get("kind"), doc.get("apiVersion")
    if kind == "Policy" and api in ("v1", f"{GROUP}/v1"):
        return "policy"
    if kind == "KubeSchedulerConfiguration" and isinstance(api, str) and api.startswith(f"{GROUP}/"):
        suffix = api.split("/", 1)[1]
        if suffix in SERVED:
            return suffix
    raise _fail(
        f"kgn_scheduler_config: the existing config has kind {kind!r} and apiVersion {api!r}; expected a Policy "
        f"(apiVersion v1) or a KubeSchedulerConfiguration of {GROUP}/{{{', '.join(SERVED)}}}. Fix or remove the "
        "existing file"
    )


def _existing_extenders(doc: dict, source: str) -> list[dict]:
    entries = doc.get("extenders") or []
    if not isinstance(entries, list):
        raise _fail(f"kgn_scheduler_config: the existing config's 'extenders' is a {type(entries).__name__}, "
                    "expected a list")
    spelling = "policy" if source in ("policy", "v1alpha2") else "config"
    try:
        return [read_existing_extender(e, spelling, f"existing extenders[{i}]") for i, e in enumerate(entries)]
    except ExtenderError as err:
        raise _fail(f"kgn_scheduler_config: {err}") from None


def _carry_policy(doc: dict) -> dict:
    """Top-level settings of an existing Policy carried into a Policy target."""
    carried = {}
    for key, value in doc.items():
        if key not in POLICY_TOP_LEVEL:
            raise _fail(f"kgn_scheduler_config: the existing Policy has the unknown top-level key {key!r} "
                        f"(kube-scheduler rejects it); allowed: {', '.join(POLICY_TOP_LEVEL)}")
        if key in ("predicates", "priorities") and value == []:
            raise _fail(f"kgn_scheduler_config: the existing Policy sets {key!r} to an empty list, which disables "
                        f"every default {key[:-1]}; remove the key (keep the defaults) or list the ones you want")
        if key not in ("kind", "apiVersion", "extenders"):
            carried[key] = value
    return carried


def _policy_to_config_settings(doc: dict, target: str) -> dict:
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
            f"kgn_scheduler_config: the existing Policy sets {key!r}, which has no equivalent in a "
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
                    f"kgn_scheduler_config: profile {profile_name!r} lists plugin {name!r} under plugins.{point}."
                    f"{state}, but {GROUP}/{target} has no such plugin; remove it or replace it (e.g. "
                    "NodeResourcesFit scoringStrategy for the *Allocated/RequestedToCapacityRatio plugins)"
                )


def _convert_profiles(profiles: object, source: str, target: str, minor: int) -> list:
    """Carry profiles to the target apiVersion, failing on what the target cannot express."""
    if not isinstance(profiles, list):
        raise _fail(f"kgn_scheduler_config: the existing config's 'profiles' is a {type(profiles).__name__}, "
                    "expected a list")
    points = list(EXTENSION_POINTS[target])
    if target in ("v1beta3", "v1") and minor >= PREENQUEUE_FIRST_MINOR:
        points.append("preEnqueue")
    allowed = ["schedulerName", "plugins", "pluginConfig"]
    if target == "v1" and minor >= PROFILE_PERCENTAGE_FIRST_MINOR:
        allowed.append("percentageOfNodesToScore")
    converted = []
    for index, profile in enumerate(profiles):
        if not isinstance(profile, dict):
            raise _fail(f"kgn_scheduler_config: existing profiles[{index}] is not a mapping")
        name = profile.get("schedulerName", f"profiles[{index}]")
        for key in profile:
            if key not in allowed:
                raise _fail(
                    f"kgn_scheduler_config: profile {name!r} of the existing {source} config sets {key!r}, which "
                    f"{GROUP}/{target} on Kubernetes 1.{minor} does not have (allowed: {', '.join(allowed)}); "
                    "remove it from the existing config"
                )
        plugins = profile.get("plugins") or {}
        for point, plugin_set in plugins.items():
            if point not in points:
                raise _fail(
                    f"kgn_scheduler_config: profile {name!r} uses the extension point plugins.{point}, which "
                    f"{GROUP}/{target} on Kubernetes 1.{minor} does not have (allowed: {', '.join(points)})"
                )
            _check_plugin_set(name, point, plugin_set, target)
        new_profile = dict(profile)
        if "pluginConfig" in profile:
            new_config = []
            for entry in profile["pluginConfig"] or []:
                if isinstance(entry, dict) and entry.get("name") in REMOVED_PLUGINS[target]:
                    raise _fail(f"kgn_scheduler_config: profile {name!r} configures plugin {entry['name']!r}, which "
                                f"{GROUP}/{target} does not have; remove its pluginConfig entry")
                entry = dict(entry)
                args = entry.get("args")
                if isinstance(args, dict) and "apiVersion" in args:
                    entry["args"] = {**args, "apiVersion": f"{GROUP}/{target}"}
                new_config.append(entry)
            new_profile["pluginConfig"] = new_config
        converted.append(new_profile)
    return converted


def _carry_config(doc: dict, source: str, target: str, minor: int) -> dict:
    """Top-level settings of an existing KubeSchedulerConfiguration carried into the target apiVersion."""
    if source == "v1alpha1":
        raise _fail(
            "kgn_scheduler_config: the existing config is KubeSchedulerConfiguration v1alpha1, whose extenders live "
            "in the Policy file named by algorithmSource.policy; pass that Policy document as 'existing' instead"
        )
    carried: dict = {}
    for key, value in doc.items():
        if key in ("apiVersion", "kind", "extenders"):
            continue
        if key == "profiles":
            carried[key] = _convert_profiles(value, source, target, minor)
        elif key in TOP_LEVEL[target]:
            carried[key] = value
        elif key in DROPPED_ON_UPGRADE:
            continue  # no effect since 1.23; serving is set by --bind-address/--secure-port
        else:
            hint = MOVED.get(key, "remove it from the existing config")
            raise _fail(
                f"kgn_scheduler_config: the existing {GROUP}/{source} config sets {key!r}, which {GROUP}/{target} "
                f"(the variant for Kubernetes 1.{minor}) does not have; {hint}"
            )
    return carried


# --------------------------------------------------------------------------------------------------------------
# The document


def _merge_extenders(kept: list[dict], new: list[dict]) -> list[dict]:
    """Existing extenders in their order, one with the same urlPrefix replaced in place, new ones appended."""
    merged = list(kept)
    for extender in new:
        for index, old in enumerate(merged):
            if same_url(old["urlPrefix"], extender["urlPrefix"]):
                merged[index] = extender
                break
        else:
            merged.append(extender)
    return merged


def kgn_scheduler_config(kubernetes_version: object, extenders: object, kubeconfig: object = None,
                         existing: object = None) -> dict:
    """Build the complete kube-scheduler config document for a Kubernetes version."""
    variant = kgn_scheduler_variant(kubernetes_version)
    minor = int(variant["kubernetes_minor"].split(".")[1])
    target = _target_api(minor)
    if extenders is None:
        extenders = []
    if not isinstance(extenders, list):
        raise _fail(f"kgn_scheduler_config: extenders must be a list of extender mappings, got "
                    f"{type(extenders).__name__}")
    try:
        new = [extender_from_neutral(e, f"extenders[{i}]") for i, e in enumerate(extenders)]
    except ExtenderError as err:
        raise _fail(f"kgn_scheduler_config: {err}") from None
    urls = [e["urlPrefix"] for e in new]
    for url in urls:
        if sum(same_url(url, other) for other in urls) > 1:
            raise _fail(f"kgn_scheduler_config: two extenders have url_prefix {url!r}; give each extender once")

    if existing in (None, "", {}):
        existing = None
    elif not isinstance(existing, dict):
        raise _fail(f"kgn_scheduler_config: existing must be the parsed current config (a mapping, e.g. from "
                    f"from_yaml/from_json) or omitted, got {type(existing).__name__}")

    source = _api_suffix(existing) if existing is not None else None
    kept = _existing_extenders(existing, source) if existing is not None else []

    if target == "policy":
        if source not in (None, "policy"):
            raise _fail(
                f"kgn_scheduler_config: Kubernetes 1.{minor} takes extenders from a Policy file "
                f"(--policy-config-file), but the existing config is a KubeSchedulerConfiguration {source}; before "
                "1.19 a --config file makes kube-scheduler ignore the Policy. Remove --config from the scheduler "
                "and pass its Policy (algorithmSource.policy) as 'existing', or upgrade to 1.19+"
            )
        carried = _carry_policy(existing) if existing is not None else {}
        document: dict = {"kind": "Policy", "apiVersion": "v1", **carried}
        spelling = "policy"
    else:
        if source == "policy":
            carried = _policy_to_config_settings(existing, target)
        elif source is not None:
            carried = _carry_config(existing, source, target, minor)
        else:
            carried = {}
        connection = dict(carried.pop("clientConnection", None) or {})
        if kubeconfig not in (None, ""):
            if not isinstance(kubeconfig, str):
                raise _fail(f"kgn_scheduler_config: kubeconfig must be a path string, got {type(kubeconfig).__name__}")
            connection["kubeconfig"] = kubeconfig
        if not connection.get("kubeconfig"):
            raise _fail(
                "kgn_scheduler_config: kubeconfig is empty and the existing config has no clientConnection.kubeconfig;"
                " pass the scheduler's kubeconfig path (e.g. /etc/kubernetes/scheduler.conf): with --config, "
                "kube-scheduler ignores the --kubeconfig flag"
            )
        document = {"apiVersion": f"{GROUP}/{target}", "kind": "KubeSchedulerConfiguration",
                    "clientConnection": connection, **carried}
        spelling = "config"

    merged = _merge_extenders(kept, new)
    try:
        check_single_binder(merged)
    except ExtenderError as err:
        raise _fail(f"kgn_scheduler_config: {err}") from None
    if merged:
        document["extenders"] = [emit_extender(e, spelling) for e in merged]
    return _plain(document)


class FilterModule:
    """kube-scheduler filters."""

    def filters(self) -> dict:
        return {
            "kgn_scheduler_variant": kgn_scheduler_variant,
            "kgn_scheduler_config": kgn_scheduler_config,
        }
