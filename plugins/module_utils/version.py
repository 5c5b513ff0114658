"""Version parsing shared by every kube-gpu-nodes filter and module.

Pure Python with no Ansible imports, so filters (controller side) and modules (node side) can both
use it. Errors are ``VersionError`` (a ``ValueError``); filters turn them into AnsibleFilterError.
"""

import re

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError

# 1.23 / 1.23.1 / v1.23.1 / 1.23.1-eks-abc / 1.27.3+k3s1 / 535.104.05 (NVIDIA drivers have 3 parts)
_VERSION_RE = re.compile(r"^v?(?P<major>\d+)\.(?P<minor>\d+)(?:\.(?P<patch>\d+))?(?P<suffix>[-+][0-9A-Za-z.+-]+)?$")
ACCEPTED = "a version string such as '1.23', '1.23.1', 'v1.23.1', '1.23.1-eks-abc' or '1.27.3+k3s1'"
# The Kubernetes releases this project plans for (docs/versions.md): 1.16 is the first with apps/v1,
# apiextensions.k8s.io/v1 and the scheduler's v1alpha2 config; 1.37 the newest whose kube-scheduler config types
# were read (docs/versions.md, "Adding a Kubernetes minor": the lines to change for the next one).
KUBERNETES_SUPPORTED = ((1, 16), (1, 37))
# The inventory's opt-in for a minor newer than the newest known one: run it with the newest known variant.
ALLOW_NEWER = "kubernetes_version_allow_newer"


class VersionError(KgnError):
    """A value that is not a version this project can reason about."""


def parse_version(value: object, what: str = "version") -> "tuple[int, int, int]":
    """Return ``(major, minor, patch)`` for a version string; patch defaults to 0.

    Floats are refused on purpose: YAML turns an unquoted ``1.20`` into ``1.2``, which would
    silently select the wrong Kubernetes minor.
    """
    if value is None:
        raise VersionError(f"{what} is not set (got None); expected {ACCEPTED}")
    if isinstance(value, bool):
        raise VersionError(f"{what} was given as the boolean {value!r}; expected {ACCEPTED}")
    if isinstance(value, float):
        raise VersionError(
            f"{what} was given as the number {value!r}; quote it in YAML (\"{value}\" may have lost a "
            f"trailing zero, e.g. 1.20 becomes 1.2); expected {ACCEPTED}"
        )
    if isinstance(value, int):
        raise VersionError(f"{what} was given as the number {value!r}; expected {ACCEPTED}")
    if not isinstance(value, str):
        raise VersionError(f"{what} was given as a {type(value).__name__} ({value!r}); expected {ACCEPTED}")
    text = value.strip()
    if not text:
        raise VersionError(f"{what} is empty; expected {ACCEPTED}")
    match = _VERSION_RE.match(text)
    if not match:
        raise VersionError(f"{what} {text!r} is not a version; expected {ACCEPTED}")
    return int(match["major"]), int(match["minor"]), int(match["patch"] or 0)


def minor_of(value: object, what: str = "version") -> "tuple[int, int]":
    """Return ``(major, minor)`` of a version string."""
    major, minor, _ = parse_version(value, what)
    return major, minor


def version_string(parts: "tuple[int, ...]") -> str:
    """Format a version tuple as a dotted string."""
    return ".".join(str(p) for p in parts)


def kubernetes_minor(value: object, what: str = "kubernetes_version", newest: bool = True,
                     allow_newer: bool = False) -> int:
    """The 1.x minor of a Kubernetes version in KUBERNETES_SUPPORTED, or VersionError naming ``what``.
    ``newest=False`` accepts releases after the newest one the version tables cover (manifests use GA APIs,
    which a newer release still serves); the kube-scheduler config, whose accepted apiVersions change, does not,
    unless ``allow_newer`` (the inventory's ALLOW_NEWER): then the caller plans with the newest known minor
    (newest_known) and says so. The minor returned is always the cluster's own."""
    major, minor, _ = parse_version(value, what)
    (lo_major, lo_minor), (hi_major, hi_minor) = KUBERNETES_SUPPORTED
    if major != 1 or (major, minor) < KUBERNETES_SUPPORTED[0]:
        supported = f"{lo_major}.{lo_minor}-{hi_major}.{hi_minor}" if newest else f"1.x from {lo_major}.{lo_minor}"
        raise VersionError(
            f"{what}: Kubernetes {value} (minor {major}.{minor}) is outside the supported range {supported}; set "
            f"kubernetes_version to the cluster's release, in that range (upgrade a cluster that is older)"
        )
    if newest and not allow_newer and (major, minor) > KUBERNETES_SUPPORTED[1]:
        raise VersionError(
            f"{what}: Kubernetes {value} (minor {major}.{minor}) is newer than {hi_major}.{hi_minor}, the newest "
            f"release this version of kube-gpu-nodes knows (its kube-scheduler config types were read for "
            f"{lo_major}.{lo_minor}-{hi_major}.{hi_minor}). Either update kube-gpu-nodes to a release that knows "
            f"{major}.{minor}, or set {ALLOW_NEWER}: true in the inventory to run it with the {hi_major}.{hi_minor} "
            f"variant (the run and the report then say so; docs/versions.md, \"Kubernetes releases newer than the "
            f"newest known\")"
        )
    return minor


def newest_known(minor: int) -> int:
    """The minor whose version facts apply to ``minor``: itself, or the newest known one for a newer minor."""
    return min(minor, KUBERNETES_SUPPORTED[1][1])
