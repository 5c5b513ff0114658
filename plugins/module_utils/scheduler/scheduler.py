"""kube-scheduler decisions: which config variant a Kubernetes version needs, and the document itself.

Filters (documentation in the sidecar ``<filter>.yml`` files):

- ``scheduler_variant``: format, apiVersion, flag, file, health endpoint, flags to remove.
- ``scheduler_config``: the complete config document (Policy or KubeSchedulerConfiguration) with the
  given extenders merged into an optional existing config.

Facts are cited by the source keys of the project's version facts (section A; docs/scheduler-versions.md).
Shared code in ``module_utils/``: ``scheduler_extender.py`` (the neutral extender form and its spellings per format) and
``scheduler_api.py`` (fields per apiVersion, reading and converting an existing config).
"""

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.plain import NotPlainError, require_bool, to_plain
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.scheduler.scheduler_api import (
    GROUP,
    POLICY_LAST_MINOR,
    SERVED,
    SchedulerConfigError,
    carry_config,
    carry_policy,
    classify,
    existing_extenders,
    policy_to_config_settings,
)
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.scheduler.scheduler_extender import (
    ExtenderError,
    check_single_binder,
    emit_extender,
    extender_from_neutral,
    same_url,
)
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.version import (
    ALLOW_NEWER,
    KUBERNETES_SUPPORTED,
    kubernetes_minor,
    newest_known,
)

POLICY_PATH = "/etc/kubernetes/scheduler-policy-config.json"
CONFIG_PATH = "/etc/kubernetes/scheduler-policy-config.yaml"

POLICY_FLAGS = ("--policy-config-file", "--policy-configmap", "--policy-configmap-namespace",
                "--use-legacy-policy-config")


def _plain(value: object) -> object:
    try:
        return to_plain(value)
    except NotPlainError as err:
        raise KgnError(f"scheduler_config: cannot represent {err} in a scheduler config; use "
                                 "strings, numbers, booleans, lists and mappings") from None


def _fail(message: str) -> KgnError:
    return KgnError(message)


def _minor(kubernetes_version: object, filter_name: str, allow_newer: object = False) -> int:
    """Return the 1.x minor of a supported Kubernetes version, or raise KgnError."""
    require_bool(allow_newer, f"{filter_name}: allow_newer ({ALLOW_NEWER})")
    return kubernetes_minor(kubernetes_version, f"{filter_name}: the Kubernetes version", allow_newer=allow_newer)


def _target_api(minor: int) -> str:
    """apiVersion suffix generated for a minor (A2b "recommended")."""
    if minor <= 18:
        return "policy"
    if minor <= 21:
        return "v1beta1"
    if minor == 22:
        return "v1beta2"  # do not combine with a Policy file (1.22 breakage, [ISS-105202])
    if minor <= 24:
        return "v1beta3"
    return "v1"


def _removed_flags(minor: int) -> "tuple[list[str], dict[str, str]]":
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


def scheduler_variant(kubernetes_version: object, allow_newer: object = False) -> dict:
    """Describe the kube-scheduler config variant for a Kubernetes version. With ``allow_newer`` a minor newer than
    the newest known one gets the newest known one's variant, and ``newer_than_known``/``note`` say so."""
    cluster_minor = _minor(kubernetes_version, "scheduler_variant", allow_newer)
    minor = newest_known(cluster_minor)
    api = _target_api(minor)
    removed, notes = _removed_flags(minor)
    policy = api == "policy"
    newer = cluster_minor != minor
    return {
        "kubernetes_minor": f"1.{cluster_minor}",
        # the minor whose version facts this variant follows (differs only with allow_newer)
        "variant_minor": f"1.{minor}",
        "newer_than_known": newer,
        "note": (f"Kubernetes {kubernetes_version} is newer than 1.{KUBERNETES_SUPPORTED[1][1]}, the newest release "
                 f"this project knows: its kube-scheduler gets the 1.{minor} variant ({ALLOW_NEWER} is true)")
        if newer else "",
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
# The document


def _merge_extenders(kept: "list[dict]", new: "list[dict]") -> "list[dict]":
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


def scheduler_config(kubernetes_version: object, extenders: object, kubeconfig: object = None,
                     existing: object = None, in_cluster: object = False, replace_resources: object = None,
                     allow_newer: object = False) -> dict:
    """Build the complete kube-scheduler config document for a Kubernetes version.

    ``replace_resources``: extended resource names whose extenders in ``existing`` the caller replaces (the
    GPU-sharing stacks' extenders of an earlier run): those are left out, ``extenders`` stand in their place.

    ``in_cluster=True`` is for a kube-scheduler running as a pod (a second scheduler on a managed control
    plane): kubeconfig must then be empty, and the document has no clientConnection.kubeconfig, so
    client-go uses the pod's service account. Only for KubeSchedulerConfiguration versions (1.19+).

    ``allow_newer``: a minor newer than the newest known one gets the newest known one's document.
    """
    variant = scheduler_variant(kubernetes_version, allow_newer)
    minor = int(variant["variant_minor"].split(".")[1])
    if not isinstance(in_cluster, bool):
        raise _fail(f"scheduler_config: in_cluster must be true or false, got {in_cluster!r}")
    if in_cluster and kubeconfig not in (None, ""):
        raise _fail(f"scheduler_config: in_cluster is true but kubeconfig is {kubeconfig!r}; an in-cluster "
                    "scheduler uses its service account, so pass an empty kubeconfig (or in_cluster=false)")
    if in_cluster and variant["format"] == "policy":
        raise _fail(f"scheduler_config: an in-cluster kube-scheduler needs a KubeSchedulerConfiguration "
                    f"(Kubernetes 1.19+), but {kubernetes_version} takes extenders from a Policy file; upgrade the "
                    "cluster (managed control planes run 1.19+) or run kube-scheduler on a control-plane host")
    if extenders is None:
        extenders = []
    if not isinstance(extenders, list):
        raise _fail(f"scheduler_config: extenders must be a list of extender mappings, got "
                    f"{type(extenders).__name__}")
    try:
        new = [extender_from_neutral(e, f"extenders[{i}]") for i, e in enumerate(extenders)]
    except ExtenderError as err:
        raise _fail(f"scheduler_config: {err}") from None
    urls = [e["urlPrefix"] for e in new]
    for url in urls:
        if sum(same_url(url, other) for other in urls) > 1:
            raise _fail(f"scheduler_config: two extenders have url_prefix {url!r}; give each extender once")

    if existing in (None, "", {}):
        existing = None
    elif not isinstance(existing, dict):
        raise _fail(f"scheduler_config: existing must be the parsed current config (a mapping, e.g. from "
                    f"from_yaml/from_json) or omitted, got {type(existing).__name__}")

    if replace_resources is not None and not isinstance(replace_resources, (list, tuple, set)):
        raise _fail(f"scheduler_config: replace_resources must be a list of resource names, got {replace_resources!r}")
    try:
        document, merged, spelling = _document(minor, new, kubeconfig, existing, in_cluster,
                                               set(replace_resources or ()))
    except SchedulerConfigError as err:
        raise _fail(str(err)) from None
    try:
        check_single_binder(merged)
    except ExtenderError as err:
        raise _fail(f"scheduler_config: {err}") from None
    if merged:
        document["extenders"] = [emit_extender(e, spelling) for e in merged]
    return _plain(document)


def managed_names(extender: dict) -> set:
    """The extended resource names an extender (internal form) manages."""
    return {r["name"] for r in extender.get("managedResources") or []}


def _document(minor: int, new: "list[dict]", kubeconfig: object, existing: "dict | None",
              in_cluster: bool = False, replaced: "set | None" = None) -> "tuple[dict, list, str]":
    """The document without extenders, the merged extenders and their spelling."""
    target = _target_api(minor)
    source = classify(existing) if existing is not None else None
    kept = existing_extenders(existing, source) if existing is not None else []
    kept = [e for e in kept if not managed_names(e) & (replaced or set())]

    if target == "policy":
        if source not in (None, "policy"):
            raise _fail(
                f"scheduler_config: Kubernetes 1.{minor} takes extenders from a Policy file "
                f"(--policy-config-file), but the existing config is a KubeSchedulerConfiguration {source}; before "
                "1.19 a --config file makes kube-scheduler ignore the Policy. Remove --config from the scheduler "
                "and pass its Policy (algorithmSource.policy) as 'existing', or upgrade to 1.19+"
            )
        carried = carry_policy(existing) if existing is not None else {}
        document: dict = {"kind": "Policy", "apiVersion": "v1", **carried}
        spelling = "policy"
    else:
        if source == "policy":
            carried = policy_to_config_settings(existing, target)
        elif source is not None:
            carried = carry_config(existing, source, target, minor)
        else:
            carried = {}
        connection = dict(carried.pop("clientConnection", None) or {})
        if kubeconfig not in (None, ""):
            if not isinstance(kubeconfig, str):
                raise _fail(f"scheduler_config: kubeconfig must be a path string, got {type(kubeconfig).__name__}")
            connection["kubeconfig"] = kubeconfig
        if in_cluster:
            connection.pop("kubeconfig", None)  # empty: client-go's in-cluster config (service account)
        elif not connection.get("kubeconfig"):
            raise _fail(
                "scheduler_config: kubeconfig is empty and the existing config has no clientConnection.kubeconfig;"
                " pass the scheduler's kubeconfig path (e.g. /etc/kubernetes/scheduler.conf): with --config, "
                "kube-scheduler ignores the --kubeconfig flag"
            )
        document = {"apiVersion": f"{GROUP}/{target}", "kind": "KubeSchedulerConfiguration",
                    **({"clientConnection": connection} if connection else {}), **carried}
        spelling = "config"

    return document, _merge_extenders(kept, new), spelling

