"""The check of the run itself: a host that stopped earlier in the run (a failed task, unreachable, or a step
whose failure was kept to that host) says why; its other checks judge what was gathered before it stopped
(plugins/module_utils/verify/checks.py says how a check is written)."""

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.verify.checks import (
    CONTROL_PLANE,
    GPU_NODE,
    cause,
    check,
    failed,
)

CAUSES = [
    cause("host_not_verified", when={"known": False},
          cause="the host was unreachable, or an earlier play failed on it so verification never ran (enable the "
                "kgn.gpu_nodes.run_failures callback to see why here)",
          fix="read the failed task in the run's output (or the runner artifacts); fix it and re-run"),
    cause("host_unreachable", when={"unreachable": True},
          cause="Ansible could not reach the host ({where}): {msg}",
          fix="check that the host is up and that Ansible can log in (address, user, key, Python), then re-run"),
    cause("host_timed_out", when={"timed_out": True},
          cause="{where} did not finish within kgn_task_timeout ({timeout} s), so Ansible stopped waiting for this "
                "host and went on with the others: the host hung mid-task (a stuck NFS mount, a frozen kernel or "
                "VM, a paused container, a package manager waiting on a lock that never frees)",
          fix="look at the host itself (its console, `dmesg`, processes in state D); once it answers, re-run "
              "site.yml: the next run finds and finishes what this one left (raise kgn_task_timeout only if the "
              "task was slow, not hung)",
          source="https://docs.ansible.com/ansible/latest/reference_appendices/playbooks_keywords.html (timeout)"),
    cause("host_failed", fallback=True,
          cause="{where} failed on this host, so the steps after it did not run there: {msg}",
          fix="fix what the message names and re-run; what the steps before it recorded is judged below"),
]


@check("host_reached", "every step of the run reached the host", kinds=(GPU_NODE, CONTROL_PLANE), causes=CAUSES)
def host_reached(seen, want, done):
    failure = seen.get("run_failure")
    if failure is None:
        return None
    if not failure:
        return failed("no verification result: the host was unreachable or failed in an earlier play", known=False)
    where = f"task '{failure.get('task')}' of play '{failure.get('play')}'"
    evidence = {"known": True, "where": where, "play": failure.get("play"), "task": failure.get("task"),
                "unreachable": bool(failure.get("unreachable")), "msg": failure.get("msg") or "",
                "timed_out": bool(failure.get("timed_out")), "timeout": failure.get("timeout") or "?",
                "failure": failure}
    if evidence["timed_out"]:
        return failed(f"hung: {where} did not finish within {evidence['timeout']} s and was stopped", **evidence)
    if failure.get("unreachable"):
        return failed(f"unreachable: {failure.get('msg')}", **evidence)
    return failed(f"failed in {where}: {failure.get('msg')}", **evidence)

