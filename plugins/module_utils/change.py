"""Changing files on a node safely, the same way for every concern.

A change is a list of planned files (``{path, content, mode}``; ``content`` None removes the file).
``apply`` validates each new file before it is written, backs up, writes atomically (a full disk
or a crash leaves the old file), restarts the service, waits until it is healthy against the live
process, and when it is not: restores every file, restarts again and fails with the service's own
words. ``render`` writes the same files under a folder instead, for review. Node side (modules) and
controller side (render) share this file, so what is rendered is what is written.

Symlinks: config-management setups often lay a file out as a link (``/etc/docker/daemon.json ->
/etc/docker-managed/daemon.json``). A write follows the link to its final target and edits that file in place
of the link (the temporary file is made in the target's folder; the target gets the planned mode and keeps its
SELinux context); the link stays. A planned removal (``content`` None) of a link removes the link only: the
target belongs to whatever made the link, and without the link the daemon no longer reads it. A link whose target
cannot be written safely (a loop, a dangling link whose target folder is missing) is refused with words naming it.
``links`` says all this in words for a module's result.
"""

import errno
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


def _final(path):
    """The file that writing ``path`` changes: the end of its chain of symlinks (a relative link read from the
    link's folder) when ``path`` is a link, else ``path`` itself."""
    return os.path.realpath(path) if os.path.islink(path) else path


def _refusal(path):
    """Why the symlink ``path`` cannot be written through (its target cannot be reached, or made where the link
    points), or None (not a link, or a link that can)."""
    if not os.path.islink(path):
        return None
    try:
        os.stat(path)
        return None
    except OSError as err:
        if err.errno == errno.ELOOP:
            return f"{path} is a symlink that loops ({path} -> {os.readlink(path)} ...)"
        real = os.path.realpath(path)
        folder = os.path.dirname(real)
        if not os.path.isdir(folder):
            return f"{path} is a symlink to {real}, whose folder {folder} does not exist"
        if err.errno == errno.ENOENT:
            return None  # dangling, but its target can be made where the link points
        return f"{path} is a symlink to {real}, which cannot be reached ({err.strerror})"


REFUSED_ADVICE = "point the link at a file in an existing folder, or replace it with the file itself"


def target(path):
    """The file that writing ``path`` changes (see ``_final``); raises ChangeFailed naming the link when ``path``
    is a symlink that cannot be written through."""
    refusal = _refusal(path)
    if refusal:
        raise ChangeFailed(f"{refusal}: nothing is written through it ({REFUSED_ADVICE})")
    return _final(path)


def _link(path):
    """None when ``path`` is not a symlink, else ``{target, refused}`` (``refused``: the words, or None)."""
    if not os.path.islink(path):
        return None
    return {"target": _final(path), "refused": _refusal(path)}


def pending(changes):
    """The planned files whose content or mode differ from the node's, with their current text. A planned path
    that is a symlink is compared through it (the target's text and mode) and its entry carries ``link``
    (``{target, refused}``); an entry of a plain file is as it always was."""
    todo = []
    for change in changes:
        link = _link(change["path"])
        extra = {"link": link} if link else {}
        if link and link["refused"]:
            # a loop cannot even be read; the write refuses it, links() and check mode say so
            if change.get("content") is not None or os.path.lexists(change["path"]):
                todo.append({**change, "before": None, **extra})
            continue
        current = host.read(change["path"])
        if change.get("content") is None:
            if host.stat(change["path"]) is not None:  # the path itself: a link is removed, not its target
                todo.append({**change, "before": current, **extra})
            continue
        info = host.stat(link["target"] if link else change["path"])
        same_text = current == change["content"]
        same_mode = info is not None and info["mode"] == _mode(change.get("mode", "0644"))
        if not (same_text and same_mode):
            todo.append({**change, "before": current, "mode_only": same_text, **extra})
    return todo


def _header(change):
    link = change.get("link")
    path = f"{change['path']} (symlink to {link['target']})" if link else change["path"]
    if change.get("content") is not None:
        return path, path
    return path, f"{change['path']} (link removed, its target kept)" if link else f"{path} (removed)"


def diff(todo):
    """Ansible's --diff entries for the pending changes (a symlink's headers name its target)."""
    return [
        {
            "before_header": _header(change)[0],
            "after_header": _header(change)[1],
            "before": change.get("before") or "",
            "after": change.get("content") or "",
        }
        for change in todo
    ]


def links(todo, check_mode=False):
    """One line of words per planned path that is a symlink, for a module's ``changes`` and ``msg``: what the run
    did (or in check mode would do) to the link and its target, or why it refuses it. ``todo``: entries of
    ``pending`` (or planned changes, or plain paths of files written outside it); a plain file says nothing."""
    words = []
    for change in todo:
        if not isinstance(change, dict):  # a path about to be written: "before" None when there is no target yet
            change = {"path": change, "content": "", "before": "" if os.path.exists(change) else None}
        link = change.get("link") or _link(change["path"])
        if not link:
            continue
        head = f"{change['path']} is a symlink to {link['target']}"
        would = "would be" if check_mode else "was"
        if change.get("content") is None:
            words.append(f"{head}: the link {would} removed, its target kept")
        elif link["refused"]:
            verb = "a run would refuse to write" if check_mode else "nothing was written"
            words.append(f"{link['refused']}: {verb} through it ({REFUSED_ADVICE})")
        else:
            made = "created" if "before" in change and change["before"] is None else "edited"  # a dangling link
            words.append(f"{head}: the target {would} {made}, the link kept")
    return words


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
    on an SELinux host, the policy's default for ``path``. A symlink ``path`` is followed: its target is replaced
    and the link kept (``temp`` must be on the target's file system: make it with ``target(path)``'s folder)."""
    path = target(path)
    context = _selinux_context(path)
    if context:
        os.setxattr(temp, SELINUX_XATTR, context)
    os.replace(temp, path)
    if context is None and os.path.exists(SELINUX_ENFORCE):
        _restorecon(path)


def write_file(path, data, mode):
    """Write ``data`` (text or bytes) to ``path`` atomically: a temporary file in the same folder, synced, given
    ``mode`` and the old file's SELinux context, then renamed over it (a full disk or a crash leaves the old file).
    A symlink ``path`` is followed: the temporary file is made beside its target, which it replaces; the link stays
    (os.replace over the link itself would turn it into a plain file and leave the target as it was)."""
    path = target(path)
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
    daemon that would load the copy, like kubelet's static pod folder). Returns the copy's path. Beside the path
    as planned: for a symlink, beside the link, with its target's text; a link about to be removed is copied as
    the link itself, which ``restore`` puts back."""
    removing_link = change.get("content") is None and os.path.islink(change["path"])
    if change.get("before") is None and not removing_link:
        return None
    folder = backup_dir or os.path.dirname(change["path"])
    os.makedirs(folder, mode=0o700, exist_ok=True)
    suffix = f".{stamp}" if backup_dir else f".{stamp}~"
    copy = os.path.join(folder, os.path.basename(change["path"]) + suffix)
    if removing_link:
        os.symlink(os.readlink(change["path"]), copy)
    else:
        shutil.copy2(change["path"], copy)
    return copy


def write(todo, backup_dir=None, module=None):
    """Validate (with ``module``), back up and write (or remove) each pending file in order: a file is
    checked after the ones before it are in place (a containerd config.toml imports the drop-in written
    first). Returns the undo list ``[(path, backup)]``; on a refusal or an error midway, what was
    written is undone before raising ChangeFailed. A symlink is written through (its target edited, the link
    kept) or, planned for removal, removed itself; one that cannot be written through is refused (ChangeFailed
    naming it) before anything of it is touched."""
    stamp = time.strftime("%Y%m%dT%H%M%S") + f"-{os.getpid()}"
    undo = []
    try:
        for change in todo:
            if change.get("content") is not None:
                target(change["path"])  # a refused symlink: before its validation, backup or write
            if module is not None:
                validate(module, change)
            copy = backup(change, backup_dir, stamp)
            undo.append((change["path"], copy))
            if change.get("content") is None:
                os.unlink(change["path"])  # a symlink: the link goes, its target stays
            elif change.get("mode_only"):
                os.chmod(change["path"], int(str(change.get("mode", "0644")), 8))  # follows a link to its target
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
    """Put every file of the undo list back (remove the ones that did not exist). Through a symlink: the target
    gets its old text back (or, made by this run, is removed) and the link stays; a removed link comes back."""
    for path, copy in reversed(undo):
        if copy and os.path.islink(copy):
            if os.path.lexists(path):
                os.unlink(path)
            os.symlink(os.readlink(copy), path)
        elif copy:
            shutil.copy2(copy, _final(path))
        elif os.path.exists(_final(path)):
            os.unlink(_final(path))


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
