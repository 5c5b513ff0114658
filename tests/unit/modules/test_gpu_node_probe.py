"""Parsers of the gpu_node_probe module (library/gpu_node_probe.py) on the texts real tools print."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
import ansible_collections.kgn.gpu_nodes.plugins.modules.gpu_node_probe as probe  # noqa: E402

# `containerd config dump` (containerd 1.7, config version 2) after nvidia was made the default.
CONTAINERD_DUMP = """version = 2
[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    [plugins."io.containerd.grpc.v1.cri".containerd]
      default_runtime_name = "nvidia"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes]
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
          runtime_type = "io.containerd.runc.v2"
          [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
            BinaryName = "/usr/bin/nvidia-container-runtime"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
          runtime_type = "io.containerd.runc.v2"
"""
# containerd 2.x (config version 3) names the CRI plugin differently and quotes with single quotes.
CONTAINERD2_DUMP = """version = 3
[plugins.'io.containerd.cri.v1.runtime'.containerd]
  default_runtime_name = 'runc'
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
    runtime_type = 'io.containerd.runc.v2'
"""
KUBEASZ_UNIT = """[Service]
ExecStart=/opt/kube/bin/kube-scheduler \\
  --bind-address=0.0.0.0 \\
  --config=/etc/kubernetes/scheduler-policy-config.yaml \\
  --kubeconfig=/etc/kubernetes/kube-scheduler.kubeconfig \\
  --v=2
Restart=always
"""


def test_containerd_v2_dump_gives_runtimes_and_default():
    assert {m.group(2) for m in probe._RUNTIME_HEADER.finditer(CONTAINERD_DUMP)} == {"nvidia", "runc"}
    assert probe._DEFAULT_NAME.search(CONTAINERD_DUMP).group(1) == "nvidia"


def test_containerd_v3_dump_gives_runtimes_and_default():
    assert {m.group(2) for m in probe._RUNTIME_HEADER.finditer(CONTAINERD2_DUMP)} == {"runc"}
    assert probe._DEFAULT_NAME.search(CONTAINERD2_DUMP).group(1) == "runc"


def test_flags_accept_both_spellings():
    assert probe._flags(["--config=/a", "--v", "2", "--leader-elect", "--port", "0"]) == {
        "config": "/a",
        "v": "2",
        "leader-elect": "true",
        "port": "0",
    }


def test_systemd_unit_exec_start_spans_continued_lines(tmp_path, monkeypatch):
    unit = tmp_path / "kube-scheduler.service"
    unit.write_text(KUBEASZ_UNIT)

    class FakeModule:
        def get_bin_path(self, name):
            return "/bin/" + name

        def run_command(self, argv):
            return 0, str(unit) + "\n", ""

    monkeypatch.setattr(probe, "_read", lambda path, limit=200000: None if "manifests" in path else unit.read_text())
    monkeypatch.setattr(probe.os.path, "exists", lambda path: True)
    persisted = probe._scheduler_persisted(FakeModule(), 5)
    assert persisted["style"] == "systemd"
    assert persisted["flags"]["config"] == "/etc/kubernetes/scheduler-policy-config.yaml"
    assert persisted["flags"]["v"] == "2"


def test_extender_urls_from_yaml_and_json_configs():
    yaml_text = 'extenders:\n- urlPrefix: "http://192.168.233.101:32766/gpushare-scheduler"\n  filterVerb: filter\n'
    json_text = '{"extenders": [{"urlPrefix": "http://127.0.0.1:32766/gpushare-scheduler", "filterVerb": "filter"}]}'
    assert probe._extender_urls(yaml_text) == ["http://192.168.233.101:32766/gpushare-scheduler"]
    assert probe._extender_urls(json_text) == ["http://127.0.0.1:32766/gpushare-scheduler"]
    assert probe._extender_urls(None) == []


def test_held_driver_package_counts_as_installed(monkeypatch):
    """nvidia_driver holds its packages; dpkg then reports the status "hi", not "ii"."""
    answers = {"nvidia-driver": (0, "hi  535.309.01-0+deb12u1", "")}
    monkeypatch.setattr(probe, "_run", lambda _m, cmd, _t: answers.get(cmd[-1], (1, "", "not installed")))
    assert probe._driver_package(None, 5) == ("nvidia-driver", "535.309.01-0+deb12u1")


def test_removed_driver_package_is_not_installed(monkeypatch):
    """"rc" (removed, config files left) must not count as an installed driver."""
    def run(_m, cmd, _t):
        return (0, "rc  535.309.01-0+deb12u1", "") if cmd[0] == "dpkg-query" else (1, "", "not an rpm system")

    monkeypatch.setattr(probe, "_run", run)
    assert probe._driver_package(None, 5) == (None, None)
