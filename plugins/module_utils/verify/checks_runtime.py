"""Checks of a GPU node's container runtime: the runtime binary the engine runs, nvidia registered and the default,
the engine running the config files on disk, and in CDI mode the node's spec (plugins/module_utils/verify/checks.py
says how a check is written)."""

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.runtime import cdi
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.verify.checks import (
    GPU_NODE,
    SOURCE_NVML_DEFAULT_RUNTIME,
    cause,
    check,
    failed,
    ok,
    skipped,
    warn,
)

RUNTIME = ("nvidia_container_toolkit", "container_runtime")
SOURCE_CONTAINER_RUNTIMES = "https://kubernetes.io/docs/setup/production-environment/container-runtimes/"
SOURCE_CONFIG_REWRITTEN = ("https://github.com/kubernetes-sigs/kubespray/issues/12277, "
                           "https://github.com/NVIDIA/gpu-operator/issues/598 (containerd config rewritten by "
                           "another installer)")
FIX_MERGE_BACK = ("re-run playbooks/nvidia_container_runtime.yml for this host: it merges the nvidia runtime back "
                  "(keeping the rest of the file), restarts containerd and checks it; then restart the device plugin "
                  "pod on this node")


def _engine(seen):
    runtime = seen.get("runtime") or {}
    engine = runtime.get("engine") or "none"
    return runtime, engine, runtime.get(engine) or {"error": f"{engine} is not installed"}


def _evidence(runtime, engine, data):
    registered = list(data.get("runtimes") or [])
    later = data.get("default_set_by") or {}
    return {
        "engine": engine,
        "active": data.get("active", True),
        "service": data.get("service") or "",
        "answered": bool(data.get("answered")),
        "error": data.get("error") or "",
        "default_runtime": data.get("default_runtime") or "",
        "runtimes": registered,
        "nvidia_registered": "nvidia" in registered,
        "config_mentions_nvidia": data.get("config_mentions_nvidia"),
        "backup_mentions_nvidia": data.get("backup_mentions_nvidia"),
        "config_path": data.get("config_path") or "",
        "dropin": data.get("dropin") or "",
        "dropin_orphaned": bool(data.get("dropin_orphaned")),
        "toolkit_installed": runtime.get("toolkit_installed"),
        # the file of the node, read after ours, that decides the default runtime (runtime.runtime_plan)
        "default_set_by": later.get("path") or "",
        "default_set_key": later.get("key") or "",
        "default_set_value": later.get("value") or "",
        "default_ours": later.get("ours") or "",
        "default_set_table": bool(later.get("table")),
        "default_config": later.get("config") or "",
    }


RUNTIME_BINARY_CAUSES = [
    cause("runtime_binary_missing", when={"exists": False},
          cause=("{binary} does not exist, so every container {engine} starts with the nvidia runtime "
                 "fails ('exec: \"nvidia-container-runtime\": executable file not found in $PATH'): "
                 "removed by hand, or its package was removed"),
          fix=("re-run playbooks/nvidia_container_runtime.yml for this host: the nvidia_container_toolkit "
               "role finds the package's missing file (dpkg --verify / rpm -V) and reinstalls it at "
               "its pinned version"),
          source=("NVIDIA Container Toolkit install guide, "
                  "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html")),
    cause("runtime_binary_fails", fallback=True,
          cause=("{binary} exists but does not run ({binary_error}): a broken install or a missing "
                 "library"),
          fix=("reinstall the NVIDIA container toolkit package (re-run "
               "playbooks/nvidia_container_runtime.yml); run `{binary} --version` on the node to see the "
               "error"),
          source="https://github.com/NVIDIA/nvidia-container-toolkit"),
]


@check("runtime_binary", "the runtime binary the engine runs exists and executes", kinds=(GPU_NODE,),
       concerns=RUNTIME, causes=RUNTIME_BINARY_CAUSES)
def runtime_binary(seen, want, done):
    _, engine, data = _engine(seen)
    binary = data.get("binary") or {}
    if engine == "none" or not binary:
        return None
    evidence = {"engine": engine, "binary": binary.get("path") or "", "exists": bool(binary.get("exists")),
                "executes": bool(binary.get("executes")), "binary_error": binary.get("error") or ""}
    if binary.get("executes"):
        return ok(f"{binary.get('path')} runs ({binary.get('version') or 'ok'})", **evidence)
    why = "does not exist" if not binary.get("exists") else f"fails: {binary.get('error')}"
    return failed(f"{binary.get('path')} {why}", **evidence)


# dockerd started with --config-file naming another file: said by both runtime checks it breaks
CONFIG_FILE_ELSEWHERE = ("{default_set_by} starts dockerd with --config-file={default_set_value}, so dockerd reads "
                         "that file, not {default_ours}, where this project writes the nvidia runtime")
CONFIG_FILE_FIX = ("set nvidia_container_runtime_docker_config: {default_set_value} and re-run "
                   "playbooks/nvidia_container_runtime.yml (it merges the runtime into that file); or remove "
                   "--config-file from the ExecStart in {default_set_by}")
CONFIG_FILE_SOURCE = ("Docker daemon configuration file (--config-file), "
                      "https://docs.docker.com/reference/cli/dockerd/#daemon-configuration-file")


RUNTIME_REGISTERED_CAUSES = [
    cause("engine_stopped", when={"active": False},
          cause=("{engine} is not running ({service}): every pod on this node, GPU or not, fails to "
                 "start. Stopped by hand, or it crashed (its journal says why)"),
          fix=("re-run playbooks/nvidia_container_runtime.yml for this host: it starts the engine again and "
               "checks it answers with nvidia as its default; if it does not start, read `journalctl "
               "-u {engine}`"),
          source=SOURCE_CONTAINER_RUNTIMES),
    cause("docker_down", when={"engine": "docker", "answered": False, "active": {"not": False}},
          cause=("dockerd does not answer ({error}): it is stopped, or refuses to start on an invalid "
                 "/etc/docker/daemon.json"),
          fix=("`systemctl status docker` and `journalctl -u docker`; check the JSON of "
               "/etc/docker/daemon.json (the nvidia_container_runtime role keeps a backup next to it) "
               "and restart docker"),
          source=("Docker daemon configuration file, "
                  "https://docs.docker.com/reference/cli/dockerd/#daemon-configuration-file")),
    cause("containerd_down", when={"engine": "containerd", "answered": False, "active": {"not": False}},
          cause=("containerd runs but does not answer `ctr version` ({error}): it is hung or its "
                 "config does not parse"),
          fix=("`systemctl status containerd`, `containerd config dump`; restore the last good "
               "/etc/containerd/config.toml backup"),
          source=("containerd CRI plugin configuration, "
                  "https://github.com/containerd/containerd/blob/main/docs/cri/config.md")),
    cause("docker_config_file_elsewhere", when={"engine": "docker", "answered": True,
                                               "default_set_key": "--config-file"},
          cause=CONFIG_FILE_ELSEWHERE, fix=CONFIG_FILE_FIX, source=CONFIG_FILE_SOURCE),
    cause("docker_nvidia_missing", when={"engine": "docker", "answered": True,
                                         "default_set_key": {"not": "--config-file"}},
          cause=("Docker has no nvidia runtime (runtimes: {runtimes}): /etc/docker/daemon.json lacks a"
                 " \"runtimes\" entry named \"nvidia\", or nvidia-container-toolkit (nvidia-docker2 for "
                 "Docker < 19.03) is not installed"),
          fix=("re-run playbooks/nvidia_container_runtime.yml for this host (merges the nvidia runtime into "
               "daemon.json, keeps your keys, restarts docker); by hand: `nvidia-ctk runtime configure"
               " --runtime=docker --set-as-default`"),
          source=("docs/field-notes.md, CentOS 7.9 + Docker 18.09 + Kubernetes 1.16; docs/versions.md "
                  "B1 [ISS-NVD-1035]")),
    cause("containerd_table_replaced_later",
          when={"engine": "containerd", "answered": True, "default_set_table": True},
          cause=("{default_set_by} has a [plugins.\"io.containerd.grpc.v1.cri\"] table and containerd reads it "
                 "after this project's {default_ours}: containerd 1.x takes a plugin's whole table from the last "
                 "file that has it, so the nvidia runtime (and the default) of {default_ours} are dropped. "
                 "{default_config} was not rewritten"),
          fix=("move that table's settings into {default_config} (this project copies its CRI table into "
               "{default_ours}) and remove the table from {default_set_by}, or make containerd read it before "
               "{default_ours}; then re-run playbooks/nvidia_container_runtime.yml"),
          source=("containerd v1.7.24 services/server/config/config.go mergeConfig (a plugin's table replaced "
                  "whole), https://github.com/containerd/containerd/issues/5837; docs/versions.md, B3b. A config "
                  "file after ours")),
    cause("containerd_nvidia_removed",
          when={"engine": "containerd", "answered": True, "backup_mentions_nvidia": True, "dropin_orphaned": False,
                "default_set_table": False},
          cause=("the nvidia runtime was removed from containerd's config after it had been configured"
                 " (a backup of {config_path} still has it): edited by hand, or the file was rewritten"
                 " by another installer (`containerd config default > {config_path}`, a "
                 "kubeadm/kubespray/k3s run, a package upgrade)"),
          fix=FIX_MERGE_BACK,
          source=SOURCE_CONFIG_REWRITTEN),
    cause("containerd_dropin_not_imported", when={"engine": "containerd", "answered": True, "dropin_orphaned": True},
          cause=("{config_path} no longer imports {dropin}, which still holds the nvidia runtime: the "
                 "file was rewritten by another installer (`containerd config default > {config_path}`"
                 " drops the `imports` line, as do kubeadm/kubespray/k3s runs and package upgrades) or"
                 " edited by hand"),
          fix=("re-run playbooks/nvidia_container_runtime.yml for this host: it adds the import back (keeping"
               " the rest of the file), restarts containerd and checks it; then restart the device "
               "plugin pod on this node"),
          source=("containerd config imports, "
                  "https://github.com/containerd/containerd/blob/main/docs/man/containerd-config.toml.5.md;"
                  " https://github.com/kubernetes-sigs/kubespray/issues/12277 (containerd config "
                  "rewritten by another installer)")),
    cause("containerd_config_rewritten",
          when={"engine": "containerd", "answered": True, "toolkit_installed": True}, fallback=True,
          cause=("the NVIDIA container toolkit is installed but containerd's config has no nvidia "
                 "runtime (runtimes: {runtimes}): the runtime was removed from {config_path} by hand, "
                 "or the file was rewritten by another installer (`containerd config default > "
                 "{config_path}`, a kubeadm/kubespray/k3s run, a package upgrade)"),
          fix=FIX_MERGE_BACK,
          source=SOURCE_CONFIG_REWRITTEN),
    cause("containerd_nvidia_missing",
          when={"engine": "containerd", "answered": True, "toolkit_installed": {"not": True}}, fallback=True,
          cause=("containerd has no nvidia runtime (runtimes: {runtimes}): {config_path} was never "
                 "configured for it, or another installer replaced it"),
          fix=("re-run playbooks/nvidia_container_runtime.yml (or `nvidia-ctk runtime configure "
               "--runtime=containerd --set-as-default`)"),
          source=("NVIDIA Container Toolkit install guide (configuring containerd), "
                  "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html")),
    cause("no_engine", when={"engine": "none"},
          cause="no container runtime (docker, containerd or CRI-O) was found on the node",
          fix="install the cluster's container runtime, or set container_runtime for this host",
          source=SOURCE_CONTAINER_RUNTIMES),
]


@check("runtime_registered", "nvidia runtime registered in the container runtime", kinds=(GPU_NODE,),
       concerns=RUNTIME, causes=RUNTIME_REGISTERED_CAUSES)
def runtime_registered(seen, want, done):
    runtime, engine, data = _engine(seen)
    if runtime.get("state_missing"):
        return skipped("skipped: the container runtime play recorded no state on this host in this run")
    if engine == "none":
        return failed("no container runtime found (docker, containerd, crio)", engine=engine,
                      requested=runtime.get("requested"))
    evidence = _evidence(runtime, engine, data)
    if not data.get("answered"):
        line = (data.get("error") or "no answer").strip().splitlines()
        return failed(f"{engine} did not answer: {line[0] if line else ''}", **evidence)
    if evidence["nvidia_registered"]:
        return ok(f"{engine} knows the nvidia runtime", **evidence)
    return failed(f"{engine} has no nvidia runtime (runtimes: {', '.join(evidence['runtimes']) or 'none'})",
                  **evidence)


RUNTIME_DEFAULT_CAUSES = [
    cause("docker_default_flag", when={"engine": "docker", "default_set_key": "--default-runtime"},
          cause=("{default_set_by} starts dockerd with --default-runtime={default_set_value}, so Docker's default "
                 "runtime is \"{default_runtime}\": daemon.json was not set back. This project sets "
                 "\"default-runtime\" in {default_ours}, and dockerd refuses to start when an option is both a flag "
                 "and in daemon.json, so the run refused to change it"),
          fix=("choose one (this project does not override a unit's ExecStart): remove --default-runtime from the "
               "ExecStart in {default_set_by} (for a packaged unit, with a drop-in in "
               "/etc/systemd/system/docker.service.d/ that resets ExecStart= and repeats the command without it) and "
               "re-run playbooks/nvidia_container_runtime.yml; or keep that default and set "
               "nvidia_container_runtime_set_default: false (GPU pods then need a RuntimeClass with handler nvidia)"),
          source=("Docker daemon configuration file (a flag and the same option in daemon.json: dockerd does not "
                  "start), https://docs.docker.com/reference/cli/dockerd/#daemon-configuration-file; "
                  "docs/versions.md, B3b. A config file after ours")),
    cause("docker_config_file_flag", when={"engine": "docker", "default_set_key": "--config-file"},
          cause=CONFIG_FILE_ELSEWHERE + "; Docker's default runtime is \"{default_runtime}\"", fix=CONFIG_FILE_FIX,
          source=CONFIG_FILE_SOURCE),
    cause("docker_default_not_nvidia", when={"engine": "docker", "nvidia_registered": True,
                                            "default_set_by": {"nonempty": False}},
          cause=("Docker's default runtime is \"{default_runtime}\", not nvidia: \"default-runtime\" in "
                 "/etc/docker/daemon.json was set back by hand or the file was replaced. Kubernetes "
                 "starts the device plugin with the default runtime, so it logs \"Failed to initialize "
                 "NVML: could not load NVML library. If this is a GPU node, did you set the docker "
                 "default runtime to `nvidia`?\" and the node advertises no GPU"),
          fix=("set \"default-runtime\": \"nvidia\" in /etc/docker/daemon.json (re-run "
               "playbooks/nvidia_container_runtime.yml, which merges it and keeps your other keys), restart "
               "docker, then delete the device plugin pod on this node (`kubectl -n kube-system delete"
               " pod <device-plugin pod>`) so it starts again under nvidia"),
          source=SOURCE_NVML_DEFAULT_RUNTIME),
    cause("docker_default_without_runtime", when={"engine": "docker", "nvidia_registered": False,
                                                 "default_set_by": {"nonempty": False}},
          cause=("Docker's default runtime is \"{default_runtime}\" and the nvidia runtime is not even "
                 "registered"),
          fix="fix \"nvidia runtime registered\" first (playbooks/nvidia_container_runtime.yml sets both)",
          source=("docs/field-notes.md, CentOS 7.9 + Docker 18.09 + Kubernetes 1.16; docs/versions.md "
                  "B2")),
    cause("containerd_default_set_later", when={"engine": "containerd", "default_set_by": {"nonempty": True}},
          cause=("{default_set_by} sets {default_set_key} = \"{default_set_value}\" and containerd reads it after "
                 "this project's {default_ours} (it reads {default_config}, then each import in order, a glob's "
                 "files sorted by name, then the imports of those files; the last file that sets a key wins), so "
                 "containerd runs \"{default_runtime}\" by default. {default_config} was not rewritten: a later "
                 "file of the node (an admin's, another installer's) has the last word"),
          fix=("choose one (this project does not override a later file, and its run refuses naming it): remove "
               "default_runtime_name from {default_set_by}; or make containerd read it before {default_ours} (rename "
               "it to sort before it when one glob imports both, or list it before it in the imports of "
               "{default_config}); or keep that default and set nvidia_container_runtime_set_default: false (GPU "
               "pods then need a RuntimeClass with handler nvidia). Then re-run "
               "playbooks/nvidia_container_runtime.yml and restart the device plugin pod on this node"),
          source=("containerd v2.1.0 cmd/containerd/server/config/config.go LoadConfigWithPlugins and resolveImports, "
                  "https://github.com/containerd/containerd/blob/v2.1.0/cmd/containerd/server/config/config.go "
                  "(v1.7.24: services/server/config/config.go); docs/versions.md, B3b. A config file after ours")),
    cause("containerd_default_not_nvidia", when={"engine": "containerd", "default_set_by": {"nonempty": False}},
          cause=("containerd's CRI default_runtime_name is \"{default_runtime}\", not nvidia: "
                 "{config_path} was changed by hand or rewritten by another installer (a fresh "
                 "`containerd config default` sets runc)"),
          fix=("re-run playbooks/nvidia_container_runtime.yml for this host (sets default_runtime_name = "
               "\"nvidia\" and keeps the rest), then restart the device plugin pod on this node"),
          source=SOURCE_CONFIG_REWRITTEN),
    cause("crio_default_set_later", when={"engine": "crio", "default_set_by": {"nonempty": True}},
          cause=("{default_set_by} sets [crio.runtime] default_runtime = \"{default_set_value}\" and CRI-O reads it "
                 "after this project's drop-in {default_ours} ({default_config} first, then every file of the "
                 "drop-in folder in lexical order; the last file that sets a key wins), so CRI-O runs "
                 "\"{default_runtime}\" by default: the drop-in is there, a later one overrides it"),
          fix=("choose one (this project does not override a later drop-in, and its run refuses naming it): remove "
               "default_runtime from {default_set_by}; or rename it to sort before {default_ours}; or keep that "
               "default and set nvidia_container_runtime_set_default: false (GPU pods then need a RuntimeClass with "
               "handler nvidia). Then re-run playbooks/nvidia_container_runtime.yml"),
          source=("CRI-O crio.conf.d(5) (configuration precedence), "
                  "https://github.com/cri-o/cri-o/blob/v1.33.0/docs/crio.conf.d.5.md; cri-o v1.33.0 "
                  "pkg/config/config.go UpdateFromPath")),
    cause("crio_default_not_nvidia", when={"engine": "crio", "default_set_by": {"nonempty": False}},
          cause=("CRI-O's default_runtime is \"{default_runtime}\", not nvidia (drop-in missing or "
                 "overridden)"),
          fix=("re-run playbooks/nvidia_container_runtime.yml (writes the /etc/crio/crio.conf.d drop-in) and "
               "restart crio"),
          source=("NVIDIA Container Toolkit install guide (configuring CRI-O), "
                  "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html;"
                  " docs/versions.md B3")),
]


@check("runtime_default", "container runtime's default runtime is nvidia", kinds=(GPU_NODE,), concerns=RUNTIME,
       causes=RUNTIME_DEFAULT_CAUSES)
def runtime_default(seen, want, done):
    runtime, engine, data = _engine(seen)
    if engine == "none":
        return None
    evidence = _evidence(runtime, engine, data)
    if not data.get("answered"):
        return skipped(f"skipped: {engine} did not answer", **evidence)
    if evidence["default_runtime"] == "nvidia":
        return ok(f"{engine} default runtime: nvidia", **evidence)
    return failed(f"{engine} default runtime is {evidence['default_runtime'] or 'unset'}, not nvidia", **evidence)


RUNTIME_CURRENT_CAUSES = [
    cause("engine_not_restarted",
          cause=("{engine} was started before {stale_files} last changed, so it does not run them yet:"
                 " a run stopped between writing the file and restarting the engine, or someone edited"
                 " it by hand"),
          fix=("re-run playbooks/nvidia_container_runtime.yml for this host (it restarts the engine and "
               "checks it)"),
          source="docs/architecture.md (a change is done only when it is live)"),
]


@check("runtime_current", "the engine runs the config files on disk", kinds=(GPU_NODE,), concerns=RUNTIME,
       causes=RUNTIME_CURRENT_CAUSES)
def runtime_current(seen, want, done):
    _, engine, data = _engine(seen)
    if engine == "none" or not data.get("answered") or "stale_files" not in data:
        return None
    stale = list(data.get("stale_files") or [])
    if stale:
        return failed(f"{engine} was started before {', '.join(stale)} last changed", engine=engine,
                      stale_files=stale)
    return ok(f"{engine} was started after its config files changed", engine=engine, stale_files=[])



# --- CDI mode: the node's spec (module_utils/runtime/cdi.py makes the rows from the live node in the container_runtime
# module; a check here only passes its row on, with the causes that explain it) -----------------------------------
_CDI_FIX = "run `ansible-playbook playbooks/nvidia_container_runtime.yml --limit <host>` (it regenerates the spec)"
CDI_CAUSES = {
    "cdi_spec": [
        cause("cdi_no_spec", when={"missing": True},
              cause=("no spec: the node's CDI spec {path} does not exist (deleted, /var/run emptied by a reboot "
                     "before the refresh ran, or `nvidia-ctk cdi generate` failed), so CDI devices such as "
                     "nvidia.com/gpu=0 cannot be injected"),
              fix=(_CDI_FIX + "; look at `systemctl status nvidia-cdi-refresh.service` for why the refresh did not"),
              source="NVIDIA container toolkit, CDI support (nvidia-ctk cdi generate; deployments/systemd at v1.20.0)"),
        cause("cdi_spec_unreadable", fallback=True,
              cause="the node's CDI spec {path} is not a CDI spec the engine can read",
              fix=_CDI_FIX,
              source="CDI specification, cncf-tags/container-device-interface SPEC.md"),
    ],
    "cdi_devices": [
        cause("cdi_gpu_not_listed",
              cause=("the spec does not list {missing}: it was generated before a GPU was added, replaced or its "
                     "MIG layout changed, so a pod asking for that GPU by name or UUID cannot start"),
              fix=_CDI_FIX,
              source="NVIDIA container toolkit, CDI support (nvidia-ctk cdi generate)"),
    ],
    "cdi_fresh": [
        cause("cdi_stale_spec",
              cause=("stale spec (driver changed): the spec was written for another driver or before the driver on "
                     "the node was installed, so it names libraries and firmware of a driver that is gone"),
              fix=(_CDI_FIX + "; after driver upgrades use playbooks/nvidia_driver_upgrade.yml, which regenerates it "
                   "before uncordoning"),
              source="docs/cdi.md, \"The spec on the node\" (a spec left stale by a driver update)"),
    ],
    "cdi_paths": [
        cause("cdi_missing_file",
              cause=("the spec names a missing file: {missing} (a driver changed under the spec, or the driver "
                     "install is incomplete); containers asking for the GPU fail to start"),
              fix=(_CDI_FIX + " when the generator gives another one; if the spec is current, the driver itself "
                   "lacks the file: reinstall the driver"),
              source="docs/cdi.md, \"The spec on the node\" (files a stale spec names)"),
    ],
    "cdi_engine": [
        cause("cdi_engine_off",
              cause=("the engine has CDI off (or does not scan the spec's folder): containerd 1.7 needs enable_cdi "
                     "(2.x has it on unless a config turns it off), Docker needs features.cdi (25+), CRI-O needs "
                     "the folder in cdi_spec_dirs"),
              fix="run `ansible-playbook playbooks/nvidia_container_runtime.yml --limit <host>` (it turns CDI on and "
                  "restarts the engine)",
              source="containerd v1.7.24 / v2.1.0 CRI config (enable_cdi, cdi_spec_dirs); Docker dockerd features.cdi"),
    ],
}


def _cdi_row(check_id):
    def run(seen, want, done):
        _, engine, data = _engine(seen)
        rows = [r for r in data.get("cdi_rows") or [] if r.get("id") == check_id]
        if engine == "none" or not rows:
            return None  # legacy mode, or a run that recorded no CDI state: nothing to say
        row = rows[0]
        evidence = {**(row.get("evidence") or {}), "engine": engine, "runtime_mode": data.get("runtime_mode")}
        return {"ok": ok, "warn": warn, "failed": failed, "skipped": skipped}.get(row.get("status"), failed)(
            row.get("summary") or "", **evidence)
    return run


for _cdi_id, _cdi_title in cdi.TITLES.items():
    check(_cdi_id, _cdi_title, kinds=(GPU_NODE,), concerns=RUNTIME, causes=CDI_CAUSES[_cdi_id])(_cdi_row(_cdi_id))
