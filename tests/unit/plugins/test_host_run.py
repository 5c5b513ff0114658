"""host.NodeModule.run_command and host.drain on real processes and pipes: what a command wrote, its exit code,
its input, and the end of a command that ansible-core's loop waits a second for."""

from __future__ import annotations

import os
import selectors
import time

from ansible_collections.kgn.gpu_nodes.plugins.module_utils import host


def node_module(**environ_update):
    """A NodeModule without AnsibleModule's argument parsing: run_command needs only its environment update."""
    module = host.NodeModule.__new__(host.NodeModule)
    module.run_command_environ_update = environ_update
    return module


def test_output_exit_code_and_environment_of_a_command():
    rc, out, err = node_module(KGN_PROBE="set").run_command(
        ["sh", "-c", 'printf "%s\\n" "$KGN_PROBE"; echo oops >&2; exit 3'])
    assert (rc, out, err) == (3, "set\n", "oops\n")


def test_data_reaches_stdin_with_the_newline_run_command_adds():
    rc, out, _ = node_module().run_command(["od", "-c"], data="a")
    assert rc == 0 and "a  \\n" in out


def test_output_larger_than_a_pipe_and_bytes_that_are_not_utf8():
    rc, out, _ = node_module().run_command(["sh", "-c", "head -c 300000 /dev/zero | tr '\\0' x; printf '\\377'"])
    assert rc == 0 and out.count("x") == 300000 and out.endswith("\udcff")


def test_a_background_process_holding_the_pipes_does_not_keep_the_caller_waiting():
    started = time.monotonic()
    rc, out, _ = node_module().run_command(["sh", "-c", "sleep 5 & echo started"])
    assert rc == 0 and out == "started\n"
    assert time.monotonic() - started < 4  # returned before the background sleep ended


class EndsBetweenTheChecks:
    """A process that has closed both pipes and ends between two poll() calls: the first says running, every later
    one says ended. ansible-core's loop then selects once more on no pipes and waits out its timeout."""

    def __init__(self, stdout, stderr):
        self.stdout, self.stderr, self.polls, self.returncode = stdout, stderr, 0, None

    def poll(self):
        self.polls += 1
        if self.polls > 1:
            self.returncode = 0
        return self.returncode

    def wait(self):
        self.returncode = 0
        return 0


class CountingSelector(selectors.PollSelector):
    def __init__(self):
        super().__init__()
        self.selects = 0

    def select(self, timeout=None):
        self.selects += 1
        return super().select(timeout)


def closed_pipe(text):
    read, write = os.pipe()
    os.write(write, text)
    os.close(write)
    return os.fdopen(read, "rb")


def test_drain_ends_when_both_pipes_are_closed_whatever_poll_says():
    proc = EndsBetweenTheChecks(closed_pipe(b"out"), closed_pipe(b"err"))
    selector = CountingSelector()
    assert host.drain(proc, selector) == (b"out", b"err")
    # the data and both ends of file arrive in the first select; none follows on pipes already closed
    assert selector.selects <= 2 and proc.stdout.closed and proc.stderr.closed


def test_a_command_that_does_not_read_its_input_answers_with_its_own_exit_code():
    rc, out, _ = node_module().run_command(["sh", "-c", "exec 0<&-; echo closed; exit 4"], data="x" * 1_000_000)
    assert (rc, out) == (4, "closed\n")
