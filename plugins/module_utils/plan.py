"""The plan of one host: every decision, from the inventory's inputs and what the node shows.

``host_plan`` is the one entry point. Each concern has a section, computed by a pure function of its
inputs (a role's settings) and its observation (what the node showed, or what the inventory says it
shows). The render calls it on the controller with the observation taken from the inventory or
recorded by the last run. A module calls its own section's function (the one ``SECTIONS`` names) on
the node, so check mode, apply, render and verify run the same code, and a module ships only its own
concern's code, not every planner's. A section lists what it had to assume in ``assumed``.
"""

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.driver.driver import driver_plan
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.labels.labels import labels_plan
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.runtime.runtime import runtime_plan
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.runtime.toolkit import toolkit_plan
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.scheduler.scheduler_plan import scheduler_plan
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.stacks.stacks import stacks_plan

SECTIONS = {
    "container_runtime": runtime_plan,
    "nvidia_driver": driver_plan,
    "node_labels": labels_plan,
    "stacks": stacks_plan,
    "kube_scheduler": scheduler_plan,
    "nvidia_container_toolkit": toolkit_plan,
}


def host_plan(inputs: object, observed: object = None) -> dict:
    """``{concern: section}`` for every concern in ``inputs`` (``{concern: settings}``), each planned from
    ``observed[concern]`` (missing: nothing observed, everything assumed and said)."""
    if not isinstance(inputs, dict) or not inputs:
        raise KgnError(f"host_plan: inputs must be a mapping of concern -> settings, one of {', '.join(SECTIONS)}")
    observed = observed or {}
    if not isinstance(observed, dict):
        raise KgnError("host_plan: observed must be a mapping of concern -> what the node shows")
    unknown = sorted(set(inputs) - set(SECTIONS))
    if unknown:
        raise KgnError(f"host_plan: no concern {', '.join(unknown)}; the concerns are {', '.join(SECTIONS)}")
    return {name: SECTIONS[name](settings, observed.get(name) or {}) for name, settings in inputs.items()}
