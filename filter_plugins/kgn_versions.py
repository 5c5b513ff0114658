"""Version parsing as a filter: ``'v1.23.1' | kgn_version`` -> plain dict.

Documentation: the sidecar ``kgn_version.yml``. The parsing itself lives in
``module_utils/kgn_version.py`` so modules and every other filter share it.
"""

from __future__ import annotations

import os
import sys

from ansible.errors import AnsibleFilterError

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "module_utils"))
from kgn_version import VersionError, parse_version, version_string


def kgn_version(value: object) -> dict:
    """Return ``{major, minor, patch, minor_string, string}`` for a version string."""
    try:
        major, minor, patch = parse_version(value, "kgn_version: the version")
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
        return {"kgn_version": kgn_version}
