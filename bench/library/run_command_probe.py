#!/usr/bin/python3
"""Bench module (not part of the collection): runs short commands on a node through ansible-core's run_command and
through host.NodeModule's, and counts the calls that took more than half a second. bench/run_command_probe.py runs it.
"""

import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.host import NodeModule

COMMANDS = (["dpkg-query", "-W", "-f", "${Package}\n", "dpkg"], ["systemctl", "show", "--property=LoadState", "dbus"],
            ["apt-cache", "policy", "dpkg"])


def probe(module, run, rounds):
    slow, calls = [], 0
    for _ in range(rounds):
        for argv in COMMANDS:
            started = time.monotonic()
            run(module, ["timeout", "60", *argv])  # as host.run calls every command
            took = time.monotonic() - started
            calls += 1
            if took > 0.5:
                slow.append(round(took, 3))
    return {"calls": calls, "over_half_a_second": slow}


def main():
    module = NodeModule(argument_spec={"rounds": {"type": "int", "default": 100}}, supports_check_mode=True)
    rounds = module.params["rounds"]
    module.exit_json(changed=False,
                     ansible_core=probe(module, lambda m, argv: AnsibleModule.run_command(m, argv), rounds),
                     node_module=probe(module, lambda m, argv: m.run_command(argv), rounds))


if __name__ == "__main__":
    main()
