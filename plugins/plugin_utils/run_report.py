"""The run's report on the controller: one row per host, written to <report dir>/<stamp>/ (check mode: <stamp>-check/).

Used by the gpu_node_report action (the last play of site.yml and playbooks/verify.yml) and by the run_failures
callback when Ansible ended the run before that play (every host of a play, or of a serial batch, failed): the same
rows either way. A host the verify play judged has its row (the gpu_node_verify action's); any other host (it
stopped earlier in the run, or was unreachable) is judged here from what it gathered before it stopped (its
recorded kgn_state_* facts) and why it stopped (kgn_run_failure).
"""

from __future__ import annotations

import os
import time

from ansible_collections.kgn.gpu_nodes.plugins.module_utils import report
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.kube import kube_api
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.verify import verify

# The register of the verify role's task on each host (roles/gpu_node_verify/tasks/main.yml).
VERIFIED = "__gpu_node_verify_result"
# Variables a row of an unverified host is made from.
_READ = ("kgn_run_failure", "kgn_run_states", "kube_api_host", "kube_api_kubeconfig", "gpu_sharing_stacks",
         "gpu_driver_version", "nvidia_mig_layout", *(f"kgn_state_{c}" for c in verify.CONCERNS),
         *(f"gpu_node_verify_{k}" for k in ("gpu_group", "control_plane_group", "node_name", "stacks", "expect_gpu",
                                            "waived_checks", "driver_version", "extra_labels", "labels_require_gpu",
                                            "mig_layout")))


def plain(value):
    """Ansible's (possibly tagged or lazy) values as plain Python data."""
    if isinstance(value, dict) or hasattr(value, "items"):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, str):
        return str(value)
    return value


def _read(host_vars, names):
    found = {}
    for name in names:
        try:
            if name in host_vars:
                found[name] = plain(host_vars[name])
        except Exception:  # an undefined or broken variable of that host: not there
            continue
    return found


def rows(hosts, hostvars, groups, check_mode):
    """The report row of every host in ``hosts``: its verify result, else judged from what it gathered in this run
    (the run_failures callback notes which states each host recorded in this run, kgn_run_states)."""
    found = []
    for host in hosts:
        own = hostvars[host] if host in hostvars else {}  # noqa: SIM401 (Ansible's hostvars)
        verified = _read(own, (VERIFIED,)).get(VERIFIED) or {}
        if verified.get("row"):
            found.append(verified["row"])
            continue
        known = _read(own, _READ)
        api = kube_api(host, groups, {host: known})["host"]
        api_vars = _read(hostvars[api], ("kgn_state_stacks",)) if api and api in hostvars else {}
        settings = verify.settings_from_vars(host, known, groups, check_mode)
        failure = known.get("kgn_run_failure") or {}
        this_run = known.get("kgn_run_states")
        states = verify.states_from_vars(known, api_vars, None if this_run is None else this_run)
        row = verify.verify_host(settings, states, None, None, failure)
        found.append(row)
    return found


def report_root(report_dir, config_file, playbook_dir):
    """The report folder: absolute as given, else relative to the folder of the ansible.cfg in use (the project)."""
    if os.path.isabs(report_dir):
        return report_dir
    base = os.path.dirname(config_file) if config_file else playbook_dir
    return os.path.join(base or os.getcwd(), report_dir)


def build(hosts, hostvars, groups, meta, check_mode):
    return report.report(rows(hosts, hostvars, groups, check_mode), dict(meta, check_mode=check_mode))


def stamp():
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())


def verdict_failures(data, fail_on):
    """The hosts whose verdict ``fail_on`` (never, failed, degraded) does not accept."""
    bad = {"never": (), "failed": ("failed",), "degraded": ("failed", "degraded")}[fail_on]
    return [row["host"] for row in data["rows"] if row.get("verdict") in bad]
