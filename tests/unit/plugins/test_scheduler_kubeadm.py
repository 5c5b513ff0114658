"""scheduler_kubeadm: kubeadm's own kube-scheduler static pod per minor (docs/versions.md A5, "kubeadm's static pod
per minor"); the render tests check each against the OpenAPI schema of its own version."""

from __future__ import annotations

import pytest
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.scheduler.scheduler_kubeadm import kubeadm_scheduler_pod
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.version import KUBERNETES_SUPPORTED

MINORS = range(KUBERNETES_SUPPORTED[0][1], KUBERNETES_SUPPORTED[1][1] + 1)  # every supported minor


def container(version):
    return kubeadm_scheduler_pod(version)["spec"]["containers"][0]


@pytest.mark.parametrize("minor", MINORS)
def test_each_minor_carries_the_fields_its_kubeadm_writes(minor):
    pod = kubeadm_scheduler_pod(f"1.{minor}.3")
    spec, ctr = pod["spec"], pod["spec"]["containers"][0]
    assert ("securityContext" in spec) is (minor >= 22)  # seccompProfile: a 1.19 field, kubeadm from 1.22
    assert ("startupProbe" in ctr) is (minor >= 19)
    assert ("--port=0" in ctr["command"]) is (19 <= minor <= 22)
    assert ("priority" in spec) is (minor >= 27)
    assert spec["priorityClassName"] == ("system-node-critical" if minor >= 19 else "system-cluster-critical")
    assert ctr["livenessProbe"]["httpGet"]["port"] == (10259 if minor >= 17 else 10251)
    assert ctr["livenessProbe"]["httpGet"]["scheme"] == ("HTTPS" if minor >= 17 else "HTTP")
    assert ctr["image"] == ("registry.k8s.io" if minor >= 25 else "k8s.gcr.io") + f"/kube-scheduler:v1.{minor}.3"
    assert ctr["command"][:6] == ["kube-scheduler", "--authentication-kubeconfig=/etc/kubernetes/scheduler.conf",
                                  "--authorization-kubeconfig=/etc/kubernetes/scheduler.conf",
                                  "--bind-address=127.0.0.1", "--kubeconfig=/etc/kubernetes/scheduler.conf",
                                  "--leader-elect=true"]


def test_the_image_tag_is_the_version_without_its_suffix_and_a_newer_minor_keeps_its_own_tag():
    assert container("v1.23.17+k3s1")["image"] == "k8s.gcr.io/kube-scheduler:v1.23.17"
    assert container("1.23")["image"] == "k8s.gcr.io/kube-scheduler:v1.23.0"
    assert container("1.38.1")["image"] == "registry.k8s.io/kube-scheduler:v1.38.1"
    assert kubeadm_scheduler_pod("1.38.1")["spec"]["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}


def test_an_unsupported_version_is_refused():
    with pytest.raises(Exception, match="outside the supported range"):
        kubeadm_scheduler_pod("1.15.3")
