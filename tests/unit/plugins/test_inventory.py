"""unknown_inputs: what each role's typo guard rejects, from the play and from every play host."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.kgn.gpu_nodes.plugins.filter.inventory import unknown_inputs

KNOWN = ["nvidia_driver_branch", "nvidia_driver_version"]
HOSTVARS = {
    "gpu-1": {"nvidia_driver_branch": "535", "ansible_host": "10.0.0.1"},
    "gpu-2": {"nvidia_driver_brnach": "550", "nvidia_driver_version": ""},
    "gpu-3": {"nvidia_driver_brnach": "550", "nvidia_driver_hold_typo": True},
}


def test_a_typo_on_any_play_host_is_found_once_in_order_of_first_appearance():
    found = unknown_inputs(["nvidia_driver_branch", "nvidia_driver_play_typo"], "nvidia_driver_", KNOWN,
                               HOSTVARS, ["gpu-1", "gpu-2", "gpu-3"])
    assert found == ["nvidia_driver_play_typo", "nvidia_driver_brnach", "nvidia_driver_hold_typo"]


def test_hosts_outside_the_play_and_other_prefixes_are_not_looked_at():
    assert unknown_inputs([], "nvidia_driver_", KNOWN, HOSTVARS, ["gpu-1"]) == []


@pytest.mark.parametrize(
    ("seen", "prefix", "hosts"),
    [("nvidia_driver_x", "nvidia_driver_", ["gpu-1"]), ([], "", ["gpu-1"]), ([], "nvidia_driver_", "gpu-1")],
)
def test_input_that_is_not_the_guards_is_refused(seen, prefix, hosts):
    with pytest.raises(AnsibleFilterError, match="unknown_inputs"):
        unknown_inputs(seen, prefix, KNOWN, HOSTVARS, hosts)
