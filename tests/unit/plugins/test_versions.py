"""Unit tests of filter_plugins/kgn_versions.py: accepted forms and refused inputs."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.kgn.gpu_nodes.plugins.filter.versions import FilterModule

version = FilterModule().filters()["version"]


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("1.23", (1, 23, 0, "1.23", "1.23.0")),
        ("1.23.1", (1, 23, 1, "1.23", "1.23.1")),
        ("v1.23.1", (1, 23, 1, "1.23", "1.23.1")),
        ("1.23.1-eks-abc", (1, 23, 1, "1.23", "1.23.1")),
        ("1.27.3+k3s1", (1, 27, 3, "1.27", "1.27.3")),
        (" 1.30.4 ", (1, 30, 4, "1.30", "1.30.4")),
        ("535.104.05", (535, 104, 5, "535.104", "535.104.5")),
    ],
)
def test_accepted_forms_parse_to_plain_parts(given, expected):
    result = version(given)
    assert result == dict(zip(("major", "minor", "patch", "minor_string", "string"), expected, strict=True))
    assert {type(v) for v in result.values()} == {int, str}


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("latest", "'latest' is not a version"),
        ("1.x", "'1.x' is not a version"),
        ("", "is empty"),
        ("   ", "is empty"),
        (None, "is not set"),
        (1.2, "was given as the number 1.2; quote it in YAML"),
        (1, "was given as the number 1"),
        (True, "was given as the boolean True"),
        (["1.23"], "was given as a list"),
        ("1.23.", "'1.23.' is not a version"),
        ("1.23-", "'1.23-' is not a version"),
        ("1", "'1' is not a version"),
    ],
)
def test_bad_inputs_fail_naming_given_and_accepted(given, message):
    with pytest.raises(AnsibleFilterError) as err:
        version(given)
    text = str(err.value)
    assert message in text
    assert text.startswith("version: the version")
    assert "expected a version string such as '1.23', '1.23.1', 'v1.23.1'" in text
