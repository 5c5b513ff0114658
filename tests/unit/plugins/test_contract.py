"""The inventory contract: null and empty values, types, choices, near-miss names, role inputs."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible_collections.kgn.gpu_nodes.plugins.filter.inventory import inventory_problems
from ansible_collections.kgn.gpu_nodes.plugins.module_utils import contract
from counting_hostvars import CountingHostvars

GOOD = {"kubernetes_version": "1.30.4", "gpu_sharing_stacks": ["nvidia_device_plugin"]}
SPECS = {"nvidia_driver": {"argument_specs": {"main": {"options": {
    "nvidia_driver_branch": {"type": "str"},
    "nvidia_driver_kernel_module": {"type": "str", "choices": ["proprietary", "open"]},
    "nvidia_driver_hold": {"type": "bool"},
}}}}}


def _role_defaults():
    """Every role's own defaults/main.yml, as playbooks/validate.yml passes them."""
    roles = Path(__file__).resolve().parents[3] / "roles"
    return {path.parents[1].name: yaml.safe_load(path.read_text()) for path in roles.glob("*/defaults/main.yml")}


DEFAULTS = _role_defaults()


def problems(**hosts):
    groups = {"all": list(hosts), "kube_control_plane": [], "gpu_nodes": list(hosts)}
    return inventory_problems(groups, hosts, SPECS, DEFAULTS)


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


def test_a_newer_minor_is_refused_unless_the_inventory_opts_in():
    found = problems(node={**GOOD, "kubernetes_version": "1.38.1"})
    assert any("newer than 1.37" in line and "kubernetes_version_allow_newer: true" in line for line in found), found
    assert problems(node={**GOOD, "kubernetes_version": "1.38.1", "kubernetes_version_allow_newer": True}) == []
    found = problems(node={**GOOD, "kubernetes_version_allow_newer": "yes"})
    assert any("kubernetes_version_allow_newer is 'yes'; write true or false" in line for line in found), found


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


def _role_specs():
    """Every role's own meta/argument_specs.yml, as playbooks/validate.yml passes them."""
    roles = Path(__file__).resolve().parents[3] / "roles"
    return {spec.parents[1].name: yaml.safe_load(spec.read_text())
            for spec in roles.glob("*/meta/argument_specs.yml")}


def test_every_input_check_names_a_role_input():
    from ansible_collections.kgn.gpu_nodes.plugins.module_utils import inputs as checks

    inputs = {name for doc in _role_specs().values() for name in doc["argument_specs"]["main"]["options"]}
    assert set(checks.BY_NAME) <= inputs, set(checks.BY_NAME) - inputs
    # every kind is some input's: a rule no input ends with is a typo in the table
    unused = [suffix for suffix, _ in checks.BY_SUFFIX if not any(name.endswith(suffix) for name in inputs)]
    assert unused == [], unused


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("gpu_node_labels_extra", {"team": "$(touch /tmp/pwned)"}, "is not a valid label value"),
        ("gpu_node_labels_extra", {"bad key!": "x"}, "is not a valid Kubernetes label key"),
        ("gpu_node_labels_extra", {"k8s.io/x": "y"}, "reserved for Kubernetes core components"),
        ("gpu_node_labels_extra", {"topology.kubernetes.io/zone": "a"}, "uses the prefix topology.kubernetes.io/"),
        ("gpu_node_labels_extra", {"kube-gpu-nodes.io/managed-labels": "a"}, "this project's own bookkeeping"),
        ("gpu_node_labels_node_name", "Node_1", "RFC 1123"),
        ("gpu_sharing_stacks_namespace", "kube_system", "a namespace is lower-case"),
        ("kube_scheduler_extender_node_ip", "10.0.0", "write the node's IP address"),
        ("nvidia_driver_version", "latest", "write NVIDIA's version"),
        ("cuda_toolkit_version", "twelve", "is not a version"),
        ("gpu_sharing_stacks_kubernetes_version", "1.12.0", "outside the supported range"),
        ("gpu_sharing_stacks_images", {"device_plugin": "nvcr.io/x y"}, "write an image reference"),
    ],
)
def test_free_form_role_inputs_are_checked_in_the_first_play(name, value, says):
    found = inventory_problems({"all": ["node"], "kube_control_plane": [], "gpu_nodes": ["node"]},
                               {"node": {**GOOD, name: value}}, _role_specs(), DEFAULTS)
    assert any(says in line for line in found), found


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("gpu_node_labels_extra", {"node-role.kubernetes.io/gpu": "", "example.com/team": "ml", "team": "a.b-c_d"}),
        ("gpu_node_labels_node_name", "gpu-01.example.com"),
        ("kube_scheduler_extender_node_ip", ""),
        ("kube_scheduler_extender_node_ip", "fd00::1"),
        ("nvidia_driver_version", "550.163.01"),
        ("cuda_toolkit_version", "12.4"),
    ],
)
def test_good_free_form_role_inputs_pass(name, value):
    assert inventory_problems({"all": ["node"], "kube_control_plane": [], "gpu_nodes": ["node"]},
                              {"node": {**GOOD, name: value}}, _role_specs(), DEFAULTS) == []


def test_hosts_with_picks_a_plays_hosts_by_a_variable_and_knows_no_hostvars_in_a_syntax_check():
    from ansible_collections.kgn.gpu_nodes.plugins.module_utils.contract import hosts_with

    hostvars = {"g1": {"nvidia_mig_layout": "all-balanced"}, "g2": {"nvidia_mig_layout": ""}, "g3": {}}
    assert hosts_with(["g1", "g2", "g3"], hostvars, "nvidia_mig_layout") == ["g1"]
    assert hosts_with(["g1", "g2", "g3"], hostvars, "nvidia_mig_layout", False) == ["g2", "g3"]
    # the first play of a run is templated before Ansible defines hostvars: every host, the play's tasks decide
    assert hosts_with(["g1", "g2"], None, "nvidia_mig_layout") == ["g1", "g2"]


def test_the_inventory_check_reads_each_host_once():
    """Ansible builds every variable of a host (its cached facts decoded and copied) per hostvars[host]."""
    hostvars = CountingHostvars({"cp": {"kubernetes_version": "1.30.4"},
                                 "g1": {**GOOD, "gpu_sharing_stacks": ["nvidia_dra"], "kubernetes_version": "1.34.1"},
                                 "g2": GOOD})
    groups = {"all": ["cp", "g1", "g2"], "kube_control_plane": ["cp"], "gpu_nodes": ["g1", "g2"]}
    inventory_problems(groups, hostvars, _role_specs(), DEFAULTS)
    assert sorted(hostvars.reads) == ["cp", "g1", "g2"]


def test_hosts_that_share_a_bad_role_input_are_each_named():
    """Hosts with the same values are checked once (group_vars); each still gets the answer."""
    bad = {**GOOD, "nvidia_driver_hold": "maybe"}
    groups = {"all": ["g1", "g2", "g3"], "kube_control_plane": [], "gpu_nodes": ["g1", "g2", "g3"]}
    found = inventory_problems(groups, {"g1": bad, "g2": bad, "g3": GOOD}, SPECS, DEFAULTS)
    assert [line.split(":")[0] for line in found if "nvidia_driver_hold" in line] == ["g1", "g2"], found
