"""What a module reads on a node: files, commands, systemd services.

Node side only (modules); every function takes the AnsibleModule for run_command and get_bin_path.
Nothing here decides anything: the planners in the other module_utils files do, from what these
functions return.
"""

import os
import re
import selectors
import subprocess
import time

from ansible.module_utils.basic import AnsibleModule

CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def read(path, limit=4_000_000):
    """The file's text, or None when it does not exist (or is not a regular file). Bytes that are not UTF-8
    read as U+FFFD: the text goes into module results, which must be UTF-8 (parsers refuse it, see
    plain.require_text; a file of ours that reads differently from its plan is simply rewritten)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read(limit)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None


def stat(path):
    """``{mode, uid, gid, mtime, type}`` of a path, or None when it does not exist."""
    try:
        info = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    kind = "file" if os.path.isfile(path) else "directory" if os.path.isdir(path) else "other"
    return {"mode": f"{info.st_mode & 0o7777:04o}", "uid": info.st_uid, "gid": info.st_gid,
            "mtime": info.st_mtime, "type": kind}


def run(module, argv, timeout=60, data=None):
    """``(rc, stdout, stderr)``; rc is None when the program does not exist on the node."""
    if not module.get_bin_path(argv[0]) and not os.path.isabs(argv[0]):
        return None, "", f"{argv[0]}: command not found"
    if os.path.isabs(argv[0]) and not os.path.exists(argv[0]):
        return None, "", f"{argv[0]}: no such file"
    return module.run_command(["timeout", str(timeout), *argv], data=data, check_rc=False)


class NodeModule(AnsibleModule):
    """AnsibleModule whose ``run_command(argv, data=..)`` does not lose a second at the end of a command.

    ansible-core's loop asks twice whether the command has ended: once with the pipes, once without.
    When it ends between the two questions, the loop selects on no pipes at all and waits out its one-
    second timeout. Under ``timeout`` (``run`` below) the command ends a moment after closing its pipes;
    on a lab node 17 of 600 short commands lost that second (bench/run_command_probe.py). Anything but a
    plain argv (a shell string, check_rc, cwd, other keywords) still goes to ansible-core's run_command.
    """

    def run_command(self, args, check_rc=False, data=None, **kwargs):
        if kwargs or check_rc or isinstance(args, (str, bytes)):
            return super().run_command(args, check_rc=check_rc, data=data, **kwargs)
        # as ansible-core does: its environment update, ~ and $VARS expanded in each argument
        env = dict(os.environ, **(self.run_command_environ_update or {}))
        argv = [os.path.expanduser(os.path.expandvars(str(arg))) for arg in args if arg is not None]
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE if data else None, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, env=env, close_fds=True)
        except OSError as err:
            self.fail_json(rc=err.errno, stdout="", stderr="", msg=f"Error executing command: {err}",
                           cmd=" ".join(argv))
        if data:
            try:
                proc.stdin.write(data if isinstance(data, bytes) else (data + "\n").encode("utf-8", "surrogateescape"))
                proc.stdin.close()
            except BrokenPipeError:  # it ended without reading all of it: its exit code and output say why
                pass
        out, err = drain(proc, selectors.PollSelector())
        return (proc.returncode, out.decode("utf-8", "surrogateescape"), err.decode("utf-8", "surrogateescape"))


def drain(proc, selector):
    """``(stdout, stderr)`` bytes of ``proc`` once both pipes are closed, or once it has ended and nothing
    arrived for a second (a process it started in the background may hold them open); then waits for it."""
    chunks = {proc.stdout: [], proc.stderr: []}
    with selector:
        for pipe in chunks:
            selector.register(pipe, selectors.EVENT_READ)
        while selector.get_map():
            events = selector.select(1)
            if not events and proc.poll() is not None:
                break
            for key, _ in events:
                chunk = os.read(key.fd, 65536)
                if chunk:
                    chunks[key.fileobj].append(chunk)
                else:
                    selector.unregister(key.fileobj)
    proc.wait()
    for pipe in chunks:
        pipe.close()
    return b"".join(chunks[proc.stdout]), b"".join(chunks[proc.stderr])


def version_of(text):
    """The first x.y.z in a tool's --version text ("Docker version 20.10.24+dfsg1" -> 20.10.24)."""
    match = re.search(r"(\d+\.\d+\.\d+)", text or "")
    return match.group(1) if match else None


def _boot_time():
    with open("/proc/stat", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("btime "):
                return int(line.split()[1])
    return 0


def process_started(pid):
    """Epoch seconds when process ``pid`` started, or None when it is gone."""
    try:
        with open(f"/proc/{int(pid)}/stat", encoding="ascii", errors="replace") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except (OSError, ValueError, IndexError):
        return None
    # field 22 of /proc/<pid>/stat (index 19 after the command name): start time in clock ticks since boot
    return _boot_time() + int(fields[19]) / CLOCK_TICKS


def service(module, unit):
    """``{loaded, active, state, pid, started}`` of a systemd unit; started is the main process's
    start (epoch seconds) or None."""
    _, out, _ = run(module, ["systemctl", "show", "--property=LoadState,ActiveState,SubState,MainPID", unit])
    props = dict(line.split("=", 1) for line in (out or "").splitlines() if "=" in line)
    pid = int(props.get("MainPID") or 0)
    return {
        "loaded": props.get("LoadState") == "loaded",
        "active": props.get("ActiveState") == "active",
        "state": f"{props.get('ActiveState', 'unknown')} ({props.get('SubState', '?')})",
        "pid": pid,
        "started": process_started(pid) if pid else None,
    }


def changed_since(paths, started):
    """The paths whose modification time is later than ``started`` (a process start, epoch seconds):
    written after the process read them, so the running process does not use them yet."""
    if started is None:
        return []
    late = []
    for path in paths:
        # the file the process reads: a symlinked config counts by its target's time, not the link's
        info = stat(os.path.realpath(path))
        # one second of slack: a file written in the same second as the restart was read by it
        if info and info["mtime"] > started + 1:
            late.append(path)
    return late


def journal(module, unit, since, lines=60):
    """The unit's journal since ``since`` (epoch seconds), as lines (empty when there is no journal)."""
    rc, out, _ = run(module, ["journalctl", "--unit", unit, "--since", f"@{int(since)}", "--output", "cat",
                              "--no-pager", "--lines", str(lines)])
    return (out or "").splitlines() if rc == 0 else []


def errors_in(lines, limit=3):
    """The lines that say what went wrong, first ones first (the first error is the cause; restarts
    repeat it), without debug/info chatter."""
    wanted = re.compile(r"(?i)(level=(error|fatal)|failed|error|invalid|unknown|refus|unable|conflict)")
    noise = re.compile(r"level=(debug|info|warning)")
    found = []
    for line in lines:
        if wanted.search(line) and not noise.search(line) and line not in found:
            found.append(line.strip())
    return found[:limit]


def wait(check, timeout, interval=2.0):
    """Call ``check()`` -> (ok, detail) until ok or ``timeout`` seconds passed; return the last answer."""
    deadline = time.monotonic() + timeout
    while True:
        ok, detail = check()
        if ok or time.monotonic() >= deadline:
            return ok, detail
        time.sleep(interval)


LOCK_PATH = "/run/lock/kube-gpu-nodes.lock"


class NodeLock:
    """One change at a time on a node: a second run (another controller, another terminal) waits until the
    first one's module is done, then finds the node as that run left it. Raises TimeoutError naming the
    holder when ``timeout`` seconds pass."""

    def __init__(self, what, timeout=600, path=LOCK_PATH):
        self.what, self.timeout, self.path, self.handle = what, timeout, path, None

    def __enter__(self):
        import fcntl

        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        self.handle = open(self.path, "a+", encoding="utf-8")
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                fcntl.flock(self.handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    self.handle.seek(0)
                    holder = self.handle.read().strip() or "unknown"
                    self.handle.close()
                    raise TimeoutError(
                        f"another kube-gpu-nodes run is changing this node ({holder}) and did not finish within "
                        f"{self.timeout} s; nothing was changed. Run again when it is done") from None
                time.sleep(2)
        self.handle.seek(0)
        self.handle.truncate()
        self.handle.write(f"{self.what}, pid {os.getpid()}, since {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}")
        self.handle.flush()
        return self

    def __exit__(self, *exc):
        import fcntl

        self.handle.seek(0)
        self.handle.truncate()
        fcntl.flock(self.handle, fcntl.LOCK_UN)
        self.handle.close()
        return False


def run_locked(module, what, run):
    """``run(module)`` under the node's lock (NodeLock) when it may change the node; a render and a check
    change nothing and need none. A lock not obtained fails the module."""
    if module.params.get("render_dir") or module.check_mode:
        run(module)
        return
    try:
        with NodeLock(what):
            run(module)
    except TimeoutError as err:
        module.fail_json(msg=str(err))


def say(module, assumed=(), repaired=(), problems=(), linked=()):
    """Show what a render had to assume, what a run repaired and what it could not, and the user's symlinks it
    wrote through (change.links), as the run's warnings."""
    for item in linked:
        module.warn(item)
    for item in assumed:
        module.warn(f"assumed: {item}")
    for item in repaired:
        module.warn(f"repaired: {item}")
    for item in problems:
        module.warn(f"not repaired: {item}")


# Where systemd looks for a unit's drop-in folders <unit>.d (systemd.unit(5), "Unit File Load Path").
DROPIN_BASES = ("/etc/systemd/system", "/run/systemd/system", "/usr/local/lib/systemd/system",
                "/usr/lib/systemd/system", "/lib/systemd/system")


def systemd_unit(module, unit):
    """A systemd unit as the next daemon-reload loads it: ``{name, load_state, fragment, dropins (in systemd's
    order), need_daemon_reload, exec_start (what systemd runs now), texts (path -> text)}``."""
    properties = "--property=LoadState,FragmentPath,DropInPaths,NeedDaemonReload,ExecStart"
    rc, out, _ = run(module, ["systemctl", "show", properties, unit], timeout=20)
    props = dict(line.split("=", 1) for line in (out or "").splitlines() if "=" in line) if rc == 0 else {}
    # What the next daemon-reload loads (every restart of this module reloads first): the drop-ins systemd lists that
    # still exist, and the *.conf files now in the unit's drop-in folders (one written by an interrupted run of ours,
    # one an admin added or renamed since the last reload).
    listed = (props.get("DropInPaths") or "").split()
    folders = {os.path.dirname(path) for path in listed} | {f"{base}/{unit}.d" for base in DROPIN_BASES}
    on_disk = [os.path.join(folder, name) for folder in sorted(folders) if os.path.isdir(folder)
               for name in sorted(os.listdir(folder)) if name.endswith(".conf")]
    dropins = [path for path in listed if os.path.isfile(path)] + [path for path in on_disk if path not in listed]
    fragment = props.get("FragmentPath") or ""
    return {
        "name": unit,
        "load_state": props.get("LoadState") or "unknown",
        "fragment": fragment,
        "dropins": dropins,
        "need_daemon_reload": props.get("NeedDaemonReload") == "yes",
        # what systemd itself runs (loaded units only: a daemon-reload may be pending), for the record and messages
        "exec_start": shown_argv(props.get("ExecStart") or ""),
        "texts": {path: read(path) for path in [fragment, *dropins] if path},
    }


def shown_argv(value):
    """The argv of `systemctl show --property=ExecStart` ("{ path=... ; argv[]=/bin/x --a --b ; ... }"), or "" """
    match = re.search(r"argv\[\]=(.*?) ;", value)
    return match.group(1).strip() if match else ""
