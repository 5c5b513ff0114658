"""The kgn.gpu_nodes.linear strategy: ansible-core's linear, waiting for a free worker on the workers' sentinels.

On real processes: the wait ends when a worker ends, without looking again and again in between; and a playbook run
with more hosts than forks runs every task on every host, in order, as ansible.builtin.linear does.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import re
import subprocess
import time
from pathlib import Path

from ansible_collections.kgn.gpu_nodes.plugins.strategy import linear

TOP = Path(__file__).resolve().parents[3]


class ClosedWorker:
    """A process object after close(): its sentinel is gone (multiprocessing raises ValueError)."""

    def is_alive(self):
        return True

    @property
    def sentinel(self):
        raise ValueError("process object is closed")


def test_a_slot_never_used_or_whose_worker_ended_or_was_closed_is_free():
    ended = multiprocessing.get_context("fork").Process(target=time.sleep, args=(0,))
    ended.start()
    ended.join()
    assert linear.running_workers([None]) is None
    assert linear.running_workers([ended]) is None
    assert linear.running_workers([ClosedWorker()]) is None


def test_the_wait_blocks_on_the_running_workers_until_one_ends():
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=time.sleep, args=(seconds,)) for seconds in (0.5, 30)]
    for worker in workers:
        worker.start()
    waits = []

    def counting_wait(sentinels, timeout):
        waits.append(sorted(sentinels))
        return multiprocessing.connection.wait(sentinels, timeout)

    try:
        assert linear.running_workers(workers) == {w.sentinel: w for w in workers}
        linear.wait_for_free_worker(workers, wait_for=counting_wait)
        assert not workers[0].is_alive() and workers[1].is_alive()
        # ansible-core's loop looks every 0.1 ms (thousands of times in 0.5 s); this one once per worker end, plus
        # a wake-up a second at most (a loaded machine may start the worker late)
        assert 1 <= len(waits) <= 3 and waits[0] == sorted(w.sentinel for w in workers)
    finally:
        workers[1].kill()
        workers[1].join()


def test_a_play_with_more_hosts_than_forks_runs_every_task_on_every_host_in_order(tmp_path):
    hosts = [f"h{i}" for i in range(7)]
    (tmp_path / "inventory.yml").write_text(
        "all:\n  vars:\n    ansible_connection: local\n"
        "    ansible_python_interpreter: '{{ ansible_playbook_python }}'\n  hosts:\n"
        + "".join(f"    {h}:\n" for h in hosts))
    (tmp_path / "play.yml").write_text(
        "- name: Three tasks on seven hosts with two forks\n  hosts: all\n  gather_facts: false\n"
        "  strategy: kgn.gpu_nodes.linear\n  tasks:\n"
        "    - name: First\n      ansible.builtin.command: sleep 0.2\n      changed_when: false\n"
        "    - name: Second\n      ansible.builtin.debug:\n        msg: second on {{ inventory_hostname }}\n"
        "    - name: Throttled, ansible-core's own wait\n      ansible.builtin.debug:\n        msg: third\n"
        "      throttle: 1\n")
    done = subprocess.run(["ansible-playbook", "-i", str(tmp_path / "inventory.yml"), "--forks", "2",
                           str(tmp_path / "play.yml")], cwd=TOP, capture_output=True, text=True, timeout=300,
                          check=False)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    recap = {host: (int(ok), int(failed)) for host, ok, failed in
             re.findall(r"^(\S+)\s+: ok=(\d+)\s+changed=\d+\s+unreachable=\d+\s+failed=(\d+)", out, re.M)}
    assert recap == {host: (3, 0) for host in hosts}, out
    assert all(f"second on {host}" in out for host in hosts)
    # linear: every host ended the first task before any started the second
    assert out.index("TASK [First]") < out.index("TASK [Second]") < out.index("second on h0")
