#!/usr/bin/python
"""Read-only probe of kube-scheduler on this host: its processes and its health endpoint."""

from __future__ import annotations

import os
import ssl
import time
import urllib.error
import urllib.request

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
---
module: kube_scheduler_probe
short_description: Report kube-scheduler processes and whether its health endpoint answers
description:
  - Lists the processes whose command line runs a C(kube-scheduler) binary (directly or through an
    interpreter, as the lab's stand-in does) with their flags and start time (epoch seconds).
  - Calls the health endpoint once (TLS not verified, because kube-scheduler serves a self-signed certificate
    unless told otherwise) and reports C(healthy=true) only when it answers 200 C(ok) AND, when
    O(scheduler_args) / O(old_pids) are given, every kube-scheduler process runs exactly those
    flags and is none of the old processes. That is how a caller knows the answer comes from the restarted
    scheduler and not from the old one still running.
  - Changes nothing; supports check mode.
options:
  url:
    description: Health endpoint, for example V(https://127.0.0.1:10259/healthz).
    type: str
    required: true
  scheduler_args:
    description: The flags (without the binary) the scheduler must run with.
    type: list
    elements: str
  old_pids:
    description: PIDs of the scheduler processes from before the change (from an earlier probe).
    type: list
    elements: int
  timeout:
    description: Seconds for the HTTP request.
    type: float
    default: 3
author: kube-gpu-nodes
"""

RETURN = r"""
healthy:
  description: Whether the expected scheduler answers its health endpoint.
  type: bool
  returned: always
reason:
  description: Why it is not healthy (empty when healthy).
  type: str
  returned: always
now:
  description: The host's clock, epoch seconds.
  type: float
  returned: always
pids:
  description: PIDs of the kube-scheduler processes (pass them as O(old_pids) to a later probe).
  type: list
  elements: int
  returned: always
processes:
  description: kube-scheduler processes, each with pid, binary, args and started (epoch seconds).
  type: list
  elements: dict
  returned: always
"""

EXAMPLES = r"""
- name: Wait for the restarted scheduler
  kube_scheduler_probe:
    url: https://127.0.0.1:10259/healthz
    scheduler_args: [--leader-elect=true, --config=/etc/kubernetes/scheduler-policy-config.yaml]
    old_pids: "{{ __before.pids }}"
  register: __probe
  until: __probe.healthy
  retries: 60
  delay: 2
"""


def _boot_time():
    with open("/proc/stat", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("btime "):
                return float(line.split()[1])
    return 0.0


def scheduler_processes():
    ticks = os.sysconf("SC_CLK_TCK")
    boot = _boot_time()
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                argv = [a.decode("utf-8", "replace") for a in handle.read().split(b"\0") if a]
            with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] == "Z":
            continue
        index = next((i for i, a in enumerate(argv[:2]) if os.path.basename(a) == "kube-scheduler"), None)
        if index is None:
            continue
        started = boot + int(fields[19]) / ticks  # field 22 of stat: start time in clock ticks since boot
        found.append({"pid": int(pid), "binary": argv[index], "args": argv[index + 1 :], "started": started})
    return found


def check_health(url, timeout):
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=context) as response:
            body = response.read(200).decode("utf-8", "replace").strip()
            return response.status == 200 and body == "ok", f"{url} answered {response.status} {body!r}"
    except (urllib.error.URLError, OSError, ValueError) as err:
        return False, f"{url} did not answer: {err}"


def main():
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "required": True},
            "scheduler_args": {"type": "list", "elements": "str"},
            "old_pids": {"type": "list", "elements": "int"},
            "timeout": {"type": "float", "default": 3},
        },
        supports_check_mode=True,
    )
    params = module.params
    now = time.time()
    processes = scheduler_processes()
    healthy, reason = check_health(params["url"], params["timeout"])
    if healthy:
        reason = ""
        if not processes:
            healthy, reason = False, "no kube-scheduler process runs"
        for proc in processes:
            if params["scheduler_args"] is not None and proc["args"] != params["scheduler_args"]:
                healthy, reason = False, f"kube-scheduler pid {proc['pid']} runs other flags: {proc['args']}"
            elif proc["pid"] in (params["old_pids"] or []):
                healthy, reason = False, f"kube-scheduler pid {proc['pid']} is the one started before the change"
    module.exit_json(
        changed=False,
        msg=reason or "kube-scheduler is healthy",
        healthy=healthy,
        reason=reason,
        now=now,
        processes=processes,
        pids=[p["pid"] for p in processes],
    )


if __name__ == "__main__":
    main()
