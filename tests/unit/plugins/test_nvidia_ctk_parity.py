"""Our runtime files next to what NVIDIA's `nvidia-ctk runtime configure` 1.20.0 wrote for the same input
(tests/unit/fixtures/nvidia-ctk-1.20.0: an empty config, `--set-as-default`, with and without `--cdi.enabled`).

Every difference is listed here with its reason; any other difference fails. `side_by_side` prints both files
line by line (kept as evidence of the comparison)."""

from __future__ import annotations

import difflib
import json
import pathlib
import tomllib

import pytest
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.runtime import runtime

CTK = pathlib.Path(__file__).parents[1] / "fixtures" / "nvidia-ctk-1.20.0"
DROPIN = "/etc/containerd/conf.d/99-nvidia.toml"
# nvidia-ctk found no runc entry to copy (empty file, no --config-source=command) and wrote its defaults for these
# keys ([NCT] config.go GetDefaultRuntimeOptions); they are containerd's own zero values, so leaving them out
# means the same to containerd. We copy the options of the built-in runc instead when containerd is installed.
CTK_DEFAULT_KEYS = {"privileged_without_host_devices": False, "runtime_engine": "", "runtime_root": ""}


def ours_containerd(cdi: bool) -> tuple:
    out = runtime.containerd_nvidia({}, "1.6.20", dropin_path=DROPIN, cdi=cdi)
    return out["config"], out["dropin"]


def theirs_containerd(cdi: bool) -> tuple:
    main = "containerd-dropin-cdi-main.toml" if cdi else "containerd-dropin-main.toml"
    dropin = "containerd-cdi-conf.d/99-nvidia.toml" if cdi else "containerd-conf.d/99-nvidia.toml"
    return tomllib.loads((CTK / main).read_text()), tomllib.loads((CTK / dropin).read_text())


@pytest.mark.parametrize("cdi", [False, True])
def test_containerd_dropin_matches_nvidia_ctk_but_for_the_listed_keys(cdi):
    our_main, our_dropin = ours_containerd(cdi)
    their_main, their_dropin = theirs_containerd(cdi)
    their_nvidia = their_dropin["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]["nvidia"]
    for key, value in CTK_DEFAULT_KEYS.items():
        assert their_nvidia.pop(key) == value
    assert our_dropin == their_dropin
    # main file: nvidia-ctk imports a glob of the drop-in folder; we import our file by name (a user's other files
    # in conf.d are not pulled in by our change)
    assert their_main == {"version": 2, "imports": ["/OUT/containerd-cdi-conf.d/*.toml" if cdi
                                                    else "/OUT/containerd-conf.d/*.toml"]}
    assert our_main == {"version": 2, "imports": [DROPIN]}


@pytest.mark.parametrize("cdi", [False, True])
def test_docker_daemon_json_matches_nvidia_ctk_but_args_key(cdi):
    ours = runtime.docker_daemon_merge({}, cdi=cdi)
    theirs = json.loads((CTK / ("docker-daemon-cdi.json" if cdi else "docker-daemon.json")).read_text())
    # Docker's documented key is runtimeArgs; nvidia-ctk writes args, which Docker ignores (both: no arguments)
    assert theirs["runtimes"]["nvidia"].pop("args") == []
    assert ours["runtimes"]["nvidia"].pop("runtimeArgs") == []
    assert ours == theirs


def test_crio_dropin_matches_nvidia_ctk():
    theirs = tomllib.loads((CTK / "crio-conf.d" / "99-nvidia.toml").read_text())
    assert runtime.crio_dropin({}) == theirs


def side_by_side() -> str:
    """Both containerd drop-ins, daemon.json and the CRI-O drop-in as text, ours against nvidia-ctk's (unified diff)."""
    parts = []
    for cdi in (False, True):
        our_main, our_dropin = ours_containerd(cdi)
        main = "containerd-dropin-cdi-main.toml" if cdi else "containerd-dropin-main.toml"
        dropin = "containerd-cdi-conf.d/99-nvidia.toml" if cdi else "containerd-conf.d/99-nvidia.toml"
        for name, text, theirs in ((f"config.toml (cdi={cdi})", runtime.toml_emit(our_main), main),
                                   (f"99-nvidia.toml (cdi={cdi})", runtime.toml_emit(our_dropin), dropin)):
            their_text = (CTK / theirs).read_text()
            parts.append(f"===== {name}: nvidia-ctk 1.20.0 ({theirs}) vs kube-gpu-nodes\n")
            parts += difflib.unified_diff(their_text.splitlines(True), text.splitlines(True), "nvidia-ctk", "ours")
            parts.append(f"\n--- nvidia-ctk ---\n{their_text}\n--- ours ---\n{text}\n")
    for cdi in (False, True):
        ours = json.dumps(runtime.docker_daemon_merge({}, cdi=cdi), indent=4) + "\n"
        theirs = (CTK / ("docker-daemon-cdi.json" if cdi else "docker-daemon.json")).read_text()
        parts.append(f"===== daemon.json (cdi={cdi})\n")
        parts += difflib.unified_diff(theirs.splitlines(True), ours.splitlines(True), "nvidia-ctk", "ours")
        parts.append("\n")
    return "".join(parts)


def test_side_by_side_shows_both_files():
    text = side_by_side()
    assert "BinaryName" in text and "enable_cdi = true" in text and '"cdi": true' in text
