"""Ansible's linear strategy, waiting for a free worker without spinning."""

from __future__ import annotations

DOCUMENTATION = r"""
---
name: linear
short_description: Ansible's linear strategy, without the busy wait for a free worker
description:
  - Runs plays exactly like C(ansible.builtin.linear), task by task, each task on every host before the next.
  - The one difference is how the controller waits when every worker (C(forks)) is busy and another host's task is
    to be queued. ansible-core's strategy looks for a free worker in a loop that sleeps 0.1 ms between rounds, so
    the controller's main process keeps a core busy for as long as the fleet is larger than C(forks); on a small
    controller that core is taken from the workers and the connections. This strategy blocks until a worker ends
    (on the workers' process sentinels), then queues the task the way ansible-core does.
  - A task with C(throttle) keeps ansible-core's own wait, which honours the throttle.
  - Enable it in ansible.cfg with C(strategy = kgn.gpu_nodes.linear) (the project's own ansible.cfg does), or per
    play with C(strategy).
author: kube-gpu-nodes
"""

from multiprocessing.connection import wait  # noqa: E402

from ansible.plugins.strategy.linear import StrategyModule as LinearStrategyModule  # noqa: E402

# A safety net only: a worker's end wakes the wait at once.
WAKE_AT_LEAST_EVERY_S = 1.0


def running_workers(workers):
    """``{sentinel: worker}`` of the running workers, or None when a slot is free (never used, or its worker has
    ended)."""
    running = {}
    for worker in workers:
        if worker is None or not worker.is_alive():
            return None
        try:
            running[worker.sentinel] = worker
        except ValueError:  # a closed process object: its slot is free
            return None
    return running


def wait_for_free_worker(workers, wait_for=wait):
    """Block until ``workers`` (the strategy's list, None for a slot never used) has a free slot."""
    while True:
        running = running_workers(workers)
        if running is None:
            return
        for sentinel in wait_for(list(running), timeout=WAKE_AT_LEAST_EVERY_S):
            # a worker's sentinel is ready as its process exits, a moment before waitpid reports it ended (what
            # is_alive asks): reap it here, or the loop would look again and again in between
            running[sentinel].join()


class StrategyModule(LinearStrategyModule):
    def _queue_task(self, host, task, task_vars, play_context):
        if not task.throttle:
            wait_for_free_worker(self._workers)
        super()._queue_task(host, task, task_vars, play_context)
