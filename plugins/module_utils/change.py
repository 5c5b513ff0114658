"""Changing files on a node safely, the same way for every concern.

A change is a list of planned files (``{path, content, mode}``; ``content`` None removes the file).
``apply`` validates each new file before it is written, backs up, writes atomically (a full disk
or a crash leaves the old file), restarts the service, waits until it is healthy against the live
process, and when it is not: restores every file, restarts again and fails with the service's own
words. ``render`` writes the same files under a folder instead, for review. Node side (modules) and
controller side (render) share this file, so what is rendered is what is written.
"""

import os
import shutil
import subprocess
import tempfile
import time

from ansible_collections.kgn.gpu_nodes.plugins.module_utils import host


class ChangeFailed(Exception):
    """A change that did not go live; the files were restored. ``message`` says what happened."""


def _mode(value):
    return f"{int(str(value), 8):04o}"


def pending(changes):
    """The planned files whose content or mode differ from the node's, with their current text."""
    todo = []
    for change in changes:
        current = host.read(change["path"])
        info = host.stat(change["path"])
        if change.get("content") is None:
            if info is not None:
                todo.append({**change, "before": current})
            continue
        same_text = current == change["content"]
        same_mode = info is not None and info["mode"] == _mode(change.get("mode", "0644"))
        if not (same_text and same_mode):
            todo.append({**change, "before": current, "mode_only": same_text})
    return todo


def diff(todo):
    """Ansible's --diff entries for the pending changes."""
    return [
        {
            "before_header": change["path"],
            "after_header": change["path"] if change.get("content") is not None else f"{change['path']} (removed)",
            "before": change.get("before") or "",
            "after": change.get("content") or "",
        }
        for change in todo
    ]


# SELinux (EL hosts): a file made with mkstemp and renamed over the old one would carry its folder's context,
# not the old file's nor the one the policy gives its path; Ansible's own file modules keep the old context
# or set the policy's default, and so does this.
SELINUX_ENFORCE = "/sys/fs/selinux/enforce"
SELINUX_XATTR = "security.selinux"
RESTORECON = ("/usr/sbin/restorecon", "/sbin/restorecon")


def _selinux_context(path):
    """The SELinux context of ``path`` as bytes, None when SELinux is off or the file has none."""
    if not os.path.exists(SELINUX_ENFORCE):
        return None
    try:
        return os.getxattr(path, SELINUX_XATTR)
    except OSError:
        return None


def _restorecon(path):
    """Set the policy's default context of a new file (restorecon from policycoreutils, on every SELinux host).
    A failure leaves the folder's context, which the file had anyway: not worth failing a change for."""
    for tool in RESTORECON:
        if os.path.exists(tool):
            subprocess.call([tool, path], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            return


def replace(temp, path):
    """Rename the finished file ``temp`` over ``path`` with the SELinux context ``path`` had, or, for a new file
    on an SELinux host, the policy's default for ``path``."""
    context = _selinux_context(path)
    if context:
        os.setxattr(temp, SELINUX_XATTR, context)
    os.replace(temp, path)
    if context is None and os.path.exists(SELINUX_ENFORCE):
        _restorecon(path)


def write_file(path, data, mode):
    """Write ``data`` (text or bytes) to ``path`` atomically: a temporary file in the same folder, synced, given
    ``mode`` and the old file's SELinux context, then renamed over it (a full disk or a crash leaves the old file)."""
    folder = os.path.dirname(path)
    os.makedirs(folder, mode=0o755, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=".kgn-", dir=folder)
    try:
        if isinstance(data, bytes):
            handle = os.fdopen(fd, "wb")
        else:
            handle = os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape")
        with handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, int(str(mode), 8) if isinstance(mode, str) else mode)
        replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise


def _write(path, content, mode):
    write_file(path, content, mode)


def validate(module, change):
    """Run the new file's validator (argv with %s for the candidate file) before it is written; raise
    ChangeFailed with the validator's words when it refuses."""
    argv = change.get("validate")
    if argv and change.get("content") is not None:
        fd, candidate = tempfile.mkstemp(prefix=".kgn-candidate-", suffix=os.path.basename(change["path"]))
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(change["content"])
            rc, out, err = host.run(module, [a.replace("%s", candidate) for a in argv])
        finally:
            os.unlink(candidate)
        if rc not in (0, None):
            words = " / ".join(host.errors_in((err or out).splitlines()) or (err or out).strip().splitlines()[-3:])
            raise ChangeFailed(f"{argv[0]} refuses the new {change['path']}, so nothing was changed: {words}")


def backup(change, backup_dir, stamp):
    """Copy the current file aside (beside it, or into backup_dir when the file's folder is read by a
    daemon that would load the copy, like kubelet's static pod folder). Returns the copy's path."""
    if change.get("before") is None:
        return None
    folder = backup_dir or os.path.dirname(change["path"])
    os.makedirs(folder, mode=0o700, exist_ok=True)
    suffix = f".{stamp}" if backup_dir else f".{stamp}~"
    copy = os.path.join(folder, os.path.basename(change["path"]) + suffix)
    shutil.copy2(change["path"], copy)
    return copy


def write(todo, backup_dir=None, module=None):
    """Validate (with ``module``), back up and write (or remove) each pending file in order: a file is
    checked after the ones before it are in place (a containerd config.toml imports the drop-in written
    first). Returns the undo list ``[(path, backup)]``; on a refusal or an error midway, what was
    written is undone before raising ChangeFailed."""
    stamp = time.strftime("%Y%m%dT%H%M%S") + f"-{os.getpid()}"
    undo = []
    try:
        for change in todo:
            if module is not None:
                validate(module, change)
            copy = backup(change, backup_dir, stamp)
            undo.append((change["path"], copy))
            if change.get("content") is None:
                os.unlink(change["path"])
            elif change.get("mode_only"):
                os.chmod(change["path"], int(str(change.get("mode", "0644")), 8))
            else:
                _write(change["path"], change["content"], change.get("mode", "0644"))
    except ChangeFailed:
        restore(undo)
        raise
    except OSError as err:
        restore(undo)
        raise ChangeFailed(
            f"writing {err.filename or 'a file'} failed ({err.strerror}); every file was put back as it was"
        ) from None
    return undo


def restore(undo):
    """Put every file of the undo list back (remove the ones that did not exist)."""
    for path, copy in reversed(undo):
        if copy:
            shutil.copy2(copy, path)
        elif os.path.exists(path):
            os.unlink(path)


def apply(module, todo, restart, healthy, timeout, backup_dir=None):
    """Write, restart, wait for health; on failure restore, restart, and raise ChangeFailed.

    ``restart()`` restarts the service (raising ChangeFailed when systemd refuses); ``healthy()``
    returns ``(ok, detail)`` from the live process. Returns the undo list (backups kept on the node).
    """
    undo = write(todo, backup_dir, module)
    try:
        restart()
        ok, detail = host.wait(healthy, timeout)
        if not ok:
            raise ChangeFailed(f"it did not come back healthy within {timeout} s: {detail}")
    except ChangeFailed as err:
        restore(undo)
        try:
            restart()
            back, back_detail = host.wait(healthy, timeout)
        except ChangeFailed as again:
            back, back_detail = False, str(again)
        state = "is healthy again" if back else f"is STILL NOT healthy ({back_detail}): look at it now"
        raise ChangeFailed(f"{err}. The previous files were restored and the service restarted; it {state}") from None
    return undo


def render(render_dir, host_name, files, plan=None, plan_name=None):
    """Write the planned files under ``<render_dir>/<host>/<absolute path>`` (and the plan as YAML-ready
    data under ``_plan/<plan_name>.json``); nothing on the node is read or changed."""
    import json

    root = os.path.join(render_dir, host_name)
    written = []
    for change in files:
        if change.get("content") is None:
            continue
        target = root + change["path"]
        _write(target, change["content"], change.get("mode", "0644"))
        written.append(target)
    if plan is not None and plan_name:
        target = os.path.join(root, "_plan", f"{plan_name}.json")
        _write(target, json.dumps(plan, indent=2, sort_keys=True) + "\n", "0644")
        written.append(target)
    return written


def recorded(concern: str, observed: dict, plan: dict, live: dict, changed: bool, check_mode: bool,
             repaired: "list | None" = None, changes: "list | None" = None) -> dict:
    """The facts a module returns about its concern: ``kgn_observed_<concern>`` (what it read before any
    change: the input a later render plans from) and ``kgn_state_<concern>`` (its plan and the live state
    it saw last: what verify judges). In check mode ``changed`` means "would change". ``repaired`` says, in
    words, what the run found broken and put back (a hold re-applied, a file restored, a restart finished);
    ``changes`` what else it changed (a first install, what the inventory asks for anew): the report's
    "changes" section lists both per host."""
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
