"""The steps of an nvidia_container_runtime task, driven from the control machine (its action plugin), where TOML is
read and written: each ``step(phase, **arguments)`` is a call of the module on the node, which returns its result or
raises StepFailed.

  observe  what the node runs and its runtime files (skipped for a render: the inventory's observation is used)
  read     the files containerd's config.toml imports, imports of imports too, globs expanded on the node
  migrate  containerd's own migration of a version 2 config.toml on containerd 2.x (the file without its imports)
  apply    the plan made here: write, restart, check live, roll back (or, for a render, write under render_dir)
"""

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.runtime import runtime
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.runtime.runtime_args import INPUTS
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.runtime.runtime_live import MAX_CONFIG_FILES


def containerd_import_texts(config_path, text, read):
    """``{path: text or None}`` of every file containerd's config imports, imports of imports too, as containerd
    resolves them (runtime.containerd_imports; ``read`` expands the globs on the node, runtime_live.go_glob, and
    returns ``{globs: {pattern: [paths]}, texts: {path: text}}``); the main config itself is not in it. A file that
    does not parse brings no imports; a file is read once, in a cycle too."""
    files, seen, queue = {config_path: text}, {config_path}, [config_path]
    while queue and len(seen) <= MAX_CONFIG_FILES:
        entries = []
        for path in queue:
            try:
                imports = runtime.toml_parse(files[path], path).get("imports") if files[path] is not None else None
            except KgnError:
                continue
            entries.extend(entry for entry, _ in runtime.containerd_imports(path, imports, lambda pattern: [pattern]))
        wanted = [path for path in dict.fromkeys(entries) if path not in seen]
        if not wanted:
            break
        answer = read(wanted)
        found = [match for path in wanted for match in (answer["globs"].get(path, []) if "*" in path else [path])]
        queue = [path for path in dict.fromkeys(found) if path not in seen]
        seen.update(queue)
        for path in queue:
            files[path] = answer["texts"].get(path)
    files.pop(config_path)
    return files


def complete(observed, containerd_config, read, migrate):
    """``observed`` (the module's observe phase) with containerd's imported files and its migrated config."""
    containerd = (observed.get("versions") or {}).get("containerd")
    files = observed.setdefault("files", {})
    if not (containerd and containerd_config):
        return observed
    for path, text in containerd_import_texts(containerd_config, files.get(containerd_config), read).items():
        files.setdefault(path, text)
    text = files.get(containerd_config)
    if runtime.migration_needed(text, containerd):
        bare = runtime.toml_parse(text, containerd_config)
        bare.pop("imports", None)  # `config migrate` would fold the imported files in
        observed["containerd_migrated"] = migrate(runtime.toml_emit(bare))
    return observed


class StepFailed(Exception):
    """A step of the module failed: its result is the task's."""

    def __init__(self, result):
        super().__init__(result.get("msg", ""))
        self.result = result


def run(params, step, check_mode):
    """The task's result: observe (unless rendering), complete the observation, plan, apply. ``params``: the
    task's arguments validated with the module's argument spec (runtime_args)."""
    try:
        node = None
        observed = params["observed"] or {}
        if not params["render_dir"]:
            found = step("observe")
            observed, node = found["observed"], found["node"]
            complete(observed, params["containerd_config"], lambda paths: step("read", paths=paths),
                     lambda text: step("migrate", text=text)["migrated"])
        inputs = {key: params[key] for key in INPUTS}
        try:
            plan = runtime.runtime_plan(inputs, observed)
            judged = runtime.judged(plan, observed, inputs)
        except KgnError as err:
            return {"failed": True, "msg": f"{err}. Nothing was changed.", "observed": observed}
        refusal = runtime.toml_refusal(plan, node)
        if refusal and not check_mode:
            return {"failed": True, "msg": f"{refusal}. Nothing was changed.", "plan": plan, "observed": observed}
        return step("apply", observed=observed, plan=plan, judged=judged)
    except StepFailed as err:
        return err.result
