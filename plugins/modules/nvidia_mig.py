#!/usr/bin/python
"""Apply a MIG layout to the GPUs of a node: read, plan (module_utils/mig/mig.py), change in order, check live."""

DOCUMENTATION = r"""
---
module: nvidia_mig
short_description: Apply a MIG (Multi-Instance GPU) layout to the GPUs of a node, in the order a node needs
description:
  - Reads the node (C(nvidia-smi -q -x); when a GPU is in MIG mode also C(nvidia-smi mig -lgi), C(-lci) and
    C(-lgip)), plans with C(kgn.gpu_nodes) module_utils C(mig.mig_plan) and applies the plan.
  - Refuses, before any change, a layout a GPU cannot take (no MIG, unknown profile, instances that do not fit
    its compute or memory slices), naming what would fit; a device plugin MIG strategy the layout contradicts
    (V(single) needs one profile on every GPU; V(none) advertises no MIG device); a profile the driver does not
    list; and a change to a GPU that still runs processes (drain the node first).
  - Order per GPU, only where the live layout differs from the wanted one - stop O(stop_services) that are
    active, destroy compute instances, destroy GPU instances, change the MIG mode, reset the GPU when the mode
    is still pending, create the GPU instances with their default compute instance (largest first), start the
    stopped services again, read the node again and fail when it does not show the wanted layout.
  - An existing matching layout changes nothing. Check mode reports what would change; diff mode shows the
    layout per GPU before and after.
  - Sources - NVIDIA Multi-Instance GPU User Guide (supported profiles, placements, "Enable MIG Mode",
    "Destroying GPU Instances"), https://docs.nvidia.com/datacenter/tesla/mig-user-guide/ and NVIDIA mig-parted
    C(deployments/systemd/config-default.yaml) (the named layouts).
options:
  layout:
    description:
      - V("") leaves MIG alone (only reads); V(all-disabled), V(all-enabled), V(all-balanced), V(all-<profile>)
        (mig-parted names, e.g. V(all-1g.10gb), V(all-3g.40gb)); or a list of C({devices, profiles}) entries
        (C(devices) a list of GPU indexes or V(all) for the GPUs no other entry names; C(profiles) a list of
        profile names, V([]) for a whole GPU with MIG off).
    type: raw
    default: ""
  strategy:
    description: The NVIDIA device plugin's migStrategy, checked against the layout.
    type: str
    choices: [none, single, mixed]
    default: none
  device_plugin:
    description: Whether the NVIDIA device plugin serves this node (the strategy is checked only then).
    type: bool
    default: true
  stop_services:
    description: systemd units that hold the GPUs (monitoring agents), stopped while the layout changes and
      started again afterwards (only those that were active).
    type: list
    elements: str
    default: []
  nvidia_smi:
    description: The nvidia-smi binary.
    type: str
    default: nvidia-smi
  render_dir:
    description:
      - Render instead of apply - contact no GPU, plan from O(observed) and write the plan to
        C(<render_dir>/<render_host>/_plan/nvidia_mig.json) (a MIG layout is commands, not files).
    type: path
  render_host:
    description: The inventory host the render is for (with O(render_dir)).
    type: str
  observed:
    description:
      - For a render, the GPUs as the last run recorded them (C(kgn_observed_nvidia_mig) - C(gpus), C(gis), C(cis),
        C(offered)); without it the plan assumes no GPU and says so in C(assumed).
    type: dict
    default: {}
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
author: kube-gpu-nodes
"""

EXAMPLES = r"""
- name: Two 3g.40gb instances on every GPU
  kgn.gpu_nodes.nvidia_mig:
    layout: all-3g.40gb
    strategy: single

- name: GPU 0 and 1 split, the others whole
  kgn.gpu_nodes.nvidia_mig:
    layout:
      - {devices: [0, 1], profiles: [3g.40gb, 2g.20gb, 1g.10gb, 1g.10gb]}
      - {devices: all, profiles: []}
    strategy: mixed
"""

RETURN = r"""
plan:
  description: Per GPU the layout before and after, whether it changes, the MIG mode change, what is destroyed and
    created, the processes on it; the ordered commands; the resources and labels the strategy implies.
  returned: always
  type: dict
observed:
  description: What the module read before any change (GPUs from -q -x, GPU and compute instances, offered profiles).
  returned: always
  type: dict
live:
  description: The layout per GPU at the end (after the change, or as read in check mode).
  returned: always
  type: list
  elements: dict
commands:
  description: The commands run (in check mode, the commands that would run; a reset only if the mode stays pending).
  returned: always
  type: list
  elements: str
"""

import os  # noqa: E402
import shlex  # noqa: E402

from ansible_collections.kgn.gpu_nodes.plugins.module_utils import change, host  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.change import recorded  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.mig import mig  # noqa: E402

MUTATING = ("-mig", "--gpu-reset", "-cgi", "-cci", "-dci", "-dgi")


class Failed(Exception):
    """A command that did not do what the plan needs; the message names it."""


def _smi(module, smi, args, what):
    rc, out, err = host.run(module, [smi, *list(args)], timeout=120)
    if rc is None:
        raise KgnError(f"{what}: nvidia-smi not found ({err.strip()}); install the driver first")
    if rc != 0:
        words = " ".join((out or err or f"exit code {rc}").strip().splitlines()[:3])
        raise Failed("{} failed (exit code {}): {}".format(" ".join(["nvidia-smi", *list(args)]), rc, words))
    return out


def read(module, smi):
    """The node's GPUs, GPU and compute instances, and the profiles the driver offers (GPUs in MIG mode)."""
    gpus = mig.parse_query_xml(_smi(module, smi, ["-q", "-x"], "reading the GPUs"))
    observed = {"gpus": gpus, "gis": [], "cis": [], "offered": None}
    if any(g["mig_current"] == "Enabled" for g in gpus):
        observed["gis"] = mig.parse_lgi(_lenient(module, smi, ["mig", "-lgi"]))
        observed["cis"] = mig.parse_lci(_lenient(module, smi, ["mig", "-lci"]))
        offered = {}
        for row in mig.parse_lgip(_lenient(module, smi, ["mig", "-lgip"])):
            offered.setdefault(row["gpu"], []).append(row["name"])
        observed["offered"] = offered
    return observed


def _lenient(module, smi, args):
    """A listing that says "No ... found" with a non-zero exit code is an empty listing."""
    rc, out, err = host.run(module, [smi, *list(args)], timeout=120)
    text = (out or "") + (err or "")
    if rc != 0 and "found" not in text.lower():
        raise Failed("nvidia-smi {} failed (exit code {}): {}".format(" ".join(args), rc, text.strip()[:300]))
    return text


def _state(observed):
    return mig.current_state(observed["gpus"], observed["gis"], observed["cis"])


def _diff(plan):
    before = "".join("GPU {} ({}): {}\n".format(g["index"], g["product_name"], g["before"]) for g in plan["gpus"])
    after = "".join("GPU {} ({}): {}\n".format(g["index"], g["product_name"], g["after"]) for g in plan["gpus"])
    return {"before_header": "MIG layout", "after_header": "MIG layout", "before": before, "after": after}


def _stop(module, units):
    stopped = []
    for unit in units:
        if host.service(module, unit)["active"]:
            rc, _, err = host.run(module, ["systemctl", "stop", unit])
            if rc != 0:
                raise Failed(f"systemctl stop {unit} failed: {err.strip()}")
            stopped.append(unit)
    return stopped


def apply(module, smi, plan, ran):
    """Run the plan's commands in order, appending each command line run to ``ran``."""
    busy = [g for g in plan["gpus"] if g["change"] and g["busy"]]
    if busy:
        raise KgnError("GPU {} {} processes (pid {}) and a MIG change needs idle GPUs. Drain the node first: the "
                       "nvidia_mig role cordons and drains it when it has an API host (kube_api_host, or a "
                       "kube_control_plane host of its cluster) and nvidia_mig_drain is auto or always; or stop the "
                       "processes. Nothing was changed".format(
                           ", ".join(str(g["index"]) for g in busy), "runs" if len(busy) == 1 else "run",
                           ", ".join(str(p) for g in busy for p in g["busy"])))
    stopped = _stop(module, module.params["stop_services"])
    try:
        for step in plan["commands"]:
            args = step["argv"][1:]
            if step.get("when") == "pending":
                gpu = mig.parse_query_xml(_smi(module, smi, ["-q", "-x"], "reading the GPUs"))[step["gpu"]]
                if gpu["mig_current"] == gpu["mig_pending"]:
                    continue
            _smi(module, smi, args, "changing MIG")
            ran.append(" ".join(step["argv"]))
            if step.get("when") == "pending":
                gpu = mig.parse_query_xml(_smi(module, smi, ["-q", "-x"], "reading the GPUs"))[step["gpu"]]
                if gpu["mig_current"] != gpu["mig_pending"]:
                    raise Failed("GPU {}: MIG mode is still pending ({}) after the GPU reset; reboot the node and "
                                 "run again".format(step["gpu"], gpu["mig_pending"]))
    finally:
        for unit in stopped:
            host.run(module, ["systemctl", "start", unit])


def render(module, p, result):
    """The plan from what the last run recorded, written under render_dir; no GPU is read or changed."""
    observed = {"gpus": [], "gis": [], "cis": [], "offered": {}, **(p["observed"] or {})}
    # facts come back through JSON: the GPU indexes of "offered" are strings there
    observed["offered"] = {int(k): v for k, v in (observed["offered"] or {}).items()}
    assumed = [] if p["observed"] else ["no GPU recorded for this node (kgn_observed_nvidia_mig): planned for none"]
    try:
        plan = mig.mig_plan(p["layout"], p["strategy"], p["device_plugin"], observed["gpus"], observed["gis"],
                            observed["cis"], observed["offered"])
    except KgnError as err:
        module.fail_json(msg=str(err), **result)
    plan = dict(plan, assumed=assumed)
    written = change.render(p["render_dir"], p["render_host"], [], plan, "nvidia_mig")
    module.exit_json(changed=False, plan=plan, observed=observed, live=[], commands=[],
                     rendered=[os.path.relpath(w, p["render_dir"]) for w in written])


def main():
    module = host.NodeModule(
        argument_spec={
            "layout": {"type": "raw", "default": ""},
            "strategy": {"type": "str", "choices": list(mig.STRATEGIES), "default": "none"},
            "device_plugin": {"type": "bool", "default": True},
            "stop_services": {"type": "list", "elements": "str", "default": []},
            "nvidia_smi": {"type": "str", "default": "nvidia-smi"},
            "render_dir": {"type": "path"},
            "render_host": {"type": "str"},
            "observed": {"type": "dict", "default": {}},
        },
        required_together=[("render_dir", "render_host")],
        supports_check_mode=True,
    )
    p = module.params
    result = {"changed": False, "plan": {}, "observed": {}, "live": [], "commands": []}
    if p["render_dir"]:
        render(module, p, result)

    def run(module):
        try:
            observed = read(module, p["nvidia_smi"])
            result["observed"] = observed
            plan = mig.mig_plan(p["layout"], p["strategy"], p["device_plugin"], observed["gpus"], observed["gis"],
                                observed["cis"], observed["offered"])
        except (KgnError, Failed) as err:
            module.fail_json(msg=str(err), **result)
        result["plan"] = plan
        if module._diff and plan["managed"]:
            result["diff"] = _diff(plan)
        if not plan["changed"] or module.check_mode:
            result["changed"] = plan["changed"]
            result["commands"] = [" ".join(s["argv"]) + (" (only if the MIG mode stays pending)"
                                                         if s.get("when") else "") for s in plan["commands"]]
            result["live"] = _state(observed)
        else:
            try:
                apply(module, p["nvidia_smi"], plan, result["commands"])
            except KgnError as err:
                module.fail_json(msg=str(err), **result)
            except Failed as err:
                result["changed"] = True
                module.fail_json(msg="{}. The GPUs are as the commands run so far left them ({}); fix the cause "
                                     "and run again, the next run finishes the layout".format(
                                         err, "; ".join(shlex.quote(c) for c in result["commands"]) or "none"),
                                 **result)
            result["changed"] = True
            try:
                live = read(module, p["nvidia_smi"])
            except (KgnError, Failed) as err:
                module.fail_json(msg=f"the layout was applied but the GPUs cannot be read again: {err}",
                                 **result)
            result["live"] = _state(live)
            problems = mig.live_problems(plan, result["live"])
            if problems:
                module.fail_json(msg="the MIG layout is not live after the change: " + "; ".join(problems), **result)
        result["ansible_facts"] = recorded("nvidia_mig", result["observed"], plan, {"gpus": result["live"]},
                                           result["changed"], module.check_mode)

    host.run_locked(module, "nvidia_mig", run)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
