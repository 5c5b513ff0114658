"""The plan of one host: every decision, from the inventory's inputs and what the node shows.

``host_plan`` is the one entry point. Each concern has a section, computed by a pure function of its
inputs (a role's settings) and its observation (what the node showed, or what the inventory says it
shows). The modules call it on the node for their own section, so check mode, apply and verify run
the same code; the render calls it on the controller with the observation taken from the inventory
or recorded by the last run. A section lists what it had to assume in ``assumed``.
"""

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.driver import driver_plan
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.labels import labels_plan
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.runtime import runtime_plan
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.scheduler_plan import scheduler_plan
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.stacks import stacks_plan
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.toolkit import toolkit_plan

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


def recorded(concern: str, observed: dict, plan: dict, live: dict, changed: bool, check_mode: bool,
             repaired: "list | None" = None, changes: "list | None" = None) -> dict:
    """The facts a module returns about its concern: ``kgn_observed_<concern>`` (what it read before any
    change: the input a later render plans from) and ``kgn_state_<concern>`` (its plan and the live state
    it saw last: what verify judges). In check mode ``changed`` means "would change". ``repaired`` says, in
    words, what the run found broken and put back (a hold re-applied, a file restored, a restart finished);
    ``changes`` what else it changed (a first install, what the inventory asks for anew): the report's
    "changes" section lists both per host."""
    import time

    return {
        f"kgn_observed_{concern}": observed,
        f"kgn_state_{concern}": {
            "plan": plan,
            "live": live,
            "changed": changed,
            "check_mode": check_mode,
            "repaired": repaired or [],
            "changes": changes or [],
            "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        },
    }
