"""The inventory contract: null and empty values, types, choices, near-miss names, role inputs."""

from __future__ import annotations

import pytest
from ansible_collections.kgn.gpu_nodes.plugins.filter.inventory import inventory_problems
from ansible_collections.kgn.gpu_nodes.plugins.module_utils import contract

GOOD = {"kubernetes_version": "1.30.4", "gpu_sharing_stacks": ["nvidia_device_plugin"]}
SPECS = {"nvidia_driver": {"argument_specs": {"main": {"options": {
    "nvidia_driver_branch": {"type": "str"},
    "nvidia_driver_kernel_module": {"type": "str", "choices": ["proprietary", "open"]},
    "nvidia_driver_hold": {"type": "bool"},
}}}}}


def problems(**hosts):
    groups = {"all": list(hosts), "kube_control_plane": [], "gpu_nodes": list(hosts)}
    return inventory_problems(groups, hosts, SPECS)


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("gpu_sharing_stacks", None, "gpu_sharing_stacks is empty (YAML reads a blank value as null); write []"),
        ("container_runtime", None, 'container_runtime is empty (YAML reads a blank value as null); write ""'),
        ("gpushare_mps", "yes", "gpushare_mps is 'yes'; write true or false"),
        ("device_plugin_sharing", "timeslicing", "accepted values: none, time-slicing, mps"),
        ("gpu_driver_version", "latest", "gpu_driver_version is 'latest'; write NVIDIA's version"),
        ("kube_api_host", "cp9", "kube_api_host is 'cp9', which is not a host of this inventory"),
        ("kubernetes_version", 1.2, "quote it"),
        ("gpu_sharing_stacks", "gpushare", "gpu_sharing_stacks is 'gpushare' (str); it must be a list"),
    ],
)
def test_bad_contract_values_are_refused(name, value, says):
    found = problems(node={**GOOD, name: value})
    assert any(says in line for line in found), found


def test_kubernetes_version_is_required():
    assert any("kubernetes_version is not set" in line for line in problems(node={"gpu_sharing_stacks": []}))


@pytest.mark.parametrize(
    ("typo", "meant"),
    [
        ("kubernetes_verison", "kubernetes_version"),
        ("container_runtimes", "container_runtime"),
        ("gpu_sharing_stack", "gpu_sharing_stacks"),
        ("nvidia_driver_brnch", "nvidia_driver_branch"),
        ("nvidia_driver_hodl", "nvidia_driver_hold"),
    ],
)
def test_names_one_edit_away_name_both(typo, meant):
    found = problems(node={**GOOD, typo: "x"})
    assert f"node: {typo} is not a variable of this project; did you mean {meant}?" in found


def test_an_unknown_role_input_is_refused_and_others_pass():
    found = problems(node={**GOOD, "nvidia_driver_nothing_like_this": 1, "my_own_variable": 2, "ansible_user": "x"})
    assert found == ["node: nvidia_driver_nothing_like_this is not an input of the nvidia_driver role "
                     "(see roles/nvidia_driver/defaults/main.yml); fix the spelling"]


def test_role_input_values_are_checked_against_the_role_spec():
    found = problems(node={**GOOD, "nvidia_driver_kernel_module": "opne", "nvidia_driver_hold": "maybe"})
    assert any("nvidia_driver_kernel_module must be one of: proprietary, open, got: opne" in line for line in found)
    assert any("nvidia_driver_hold" in line for line in found), found


def test_a_problem_every_host_has_is_said_once():
    found = problems(a={**GOOD, "kubernetes_verison": "1"}, b={**GOOD, "kubernetes_verison": "1"})
    assert found == ["every host: kubernetes_verison is not a variable of this project; did you mean "
                     "kubernetes_version?"]


def test_a_good_inventory_has_no_problem():
    assert problems(node={**GOOD, "device_plugin_sharing": "mps", "gpushare_mps": False,
                          "gpu_driver_version": "535.216.01", "nvidia_driver_kernel_module": "open"}) == []


@pytest.mark.parametrize(
    ("a", "b", "near"),
    [("abc", "abd", True), ("abc", "acb", True), ("abc", "abcd", True), ("abc", "ab", True),
     ("abc", "abc", False), ("abc", "xyz", False), ("abcd", "ab", False)],
)
def test_near(a, b, near):
    assert contract.near(a, b) is near


def test_hosts_with_picks_a_plays_hosts_by_a_variable_and_knows_no_hostvars_in_a_syntax_check():
    from ansible_collections.kgn.gpu_nodes.plugins.module_utils.contract import hosts_with

    hostvars = {"g1": {"nvidia_mig_layout": "all-balanced"}, "g2": {"nvidia_mig_layout": ""}, "g3": {}}
    assert hosts_with(["g1", "g2", "g3"], hostvars, "nvidia_mig_layout") == ["g1"]
    assert hosts_with(["g1", "g2", "g3"], hostvars, "nvidia_mig_layout", False) == ["g2", "g3"]
    # the first play of a run is templated before Ansible defines hostvars: every host, the play's tasks decide
    assert hosts_with(["g1", "g2"], None, "nvidia_mig_layout") == ["g1", "g2"]
