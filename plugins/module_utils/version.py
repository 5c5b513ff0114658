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
# apiextensions.k8s.io/v1 and the scheduler's v1alpha2 config; 1.36 the newest in the version tables.
KUBERNETES_SUPPORTED = ((1, 16), (1, 36))


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


def kubernetes_minor(value: object, what: str = "kubernetes_version", newest: bool = True) -> int:
    """The 1.x minor of a Kubernetes version in KUBERNETES_SUPPORTED, or VersionError naming ``what``.
    ``newest=False`` accepts releases after the newest one the version tables cover (manifests use GA APIs,
    which a newer release still serves); the kube-scheduler config, whose accepted apiVersions change, does not."""
    major, minor, _ = parse_version(value, what)
    (lo_major, lo_minor), (hi_major, hi_minor) = KUBERNETES_SUPPORTED
    if major != 1 or (major, minor) < KUBERNETES_SUPPORTED[0] or (newest and (major, minor) > KUBERNETES_SUPPORTED[1]):
        supported = f"{lo_major}.{lo_minor}-{hi_major}.{hi_minor}" if newest else f"1.x from {lo_major}.{lo_minor}"
        raise VersionError(
            f"{what}: Kubernetes {value} (minor {major}.{minor}) is outside the supported range {supported}; set "
            f"kubernetes_version to the cluster's release, in that range (upgrade a cluster that is older)"
        )
    return minor
