"""Version parsing as a filter: ``'v1.23.1' | version`` -> plain dict.

Documentation: the sidecar ``version.yml``. The parsing itself lives in
``module_utils/version.py`` so modules and every other filter share it.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.version import VersionError, parse_version, version_string


def version(value: object) -> dict:
    """Return ``{major, minor, patch, minor_string, string}`` for a version string."""
    try:
        major, minor, patch = parse_version(value, "version: the version")
    except VersionError as err:
        raise AnsibleFilterError(str(err)) from None
    return {
        "major": major,
        "minor": minor,
        "patch": patch,
        "minor_string": version_string((major, minor)),
        "string": version_string((major, minor, patch)),
    }


class FilterModule:
    """Version filters."""

    def filters(self) -> dict:
        return {"version": version}
