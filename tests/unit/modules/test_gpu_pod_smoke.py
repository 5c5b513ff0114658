"""gpu_pod_smoke module, run through `ansible localhost -m` against a fake kubectl: leftovers deleted first, one pod
per stack created, waited for, judged from its status, events and log, and deleted."""

from __future__ import annotations

import datetime
import json

from kubectl_fake import answer, calls, install, items, run_module

H100_L = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-0000-0000-0000-000000000000)"
H100_HOST = {"listed": True, "present": True, "smi_found": True, "pci_gpus": 0, "error": "",
             "gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-00000000-0000-0000-0000-000000000000",
                       "mig": []}]}
NO_GPU_HOST = {"listed": False, "present": False, "smi_found": True, "pci_gpus": 0, "gpus": [],
               "error": "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."}
NAME = "kgn-gpu-smoke-nvidia-device-plugin-gpu-1"
NOT_FOUND = answer(rc=1, stderr='Error from server (NotFound): leases.coordination.k8s.io "kube-scheduler" not found')


def pod(status=None, **spec):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": NAME, "namespace": "default"},
            "spec": spec, "status": status or {}}


def log_text(smi):
    return "\n".join(["kgn-smoke: nvidia-smi -L", smi, "kgn-smoke: rc 0", "kgn-smoke: dev", "nvidia0",
                      "kgn-smoke: proc", "kgn-smoke: env", "kgn-smoke: end"]) + "\n"


def smoke(tmp_path, rules, check=False, **args):
    folder = tmp_path / "bin"
    base = {"node_name": "gpu-1", "stacks": ["nvidia_device_plugin"], "kubectl": str(install(folder, rules)),
            "kubeconfig": "/fake/admin.conf", "api_host": "cp1", "timeout": 3}
    args = {key: value for key, value in {**base, **args}.items() if value is not None}  # None: the option left out
    return run_module("gpu_pod_smoke", args, check=check), [c["argv"] for c in calls(folder)], calls(folder)


def rules(pods, events=(), log="", remaining=""):
    return [{"match": ["delete"], "answers": [answer('pod "x" deleted\n')]},
            {"match": ["create"], "answers": [answer(f"pod/{NAME}\n")]},
            {"match": ["get", "--output=name"], "answers": [answer(remaining)]},
            {"match": ["get", "pods"], "answers": [answer(items(*p)) for p in pods]},
            {"match": ["get", "events"], "answers": [answer(items(*events))]},
            {"match": ["logs"], "answers": [answer(log)]},
            {"match": ["get", "leases.coordination.k8s.io"], "answers": [NOT_FOUND]}]


def test_a_pod_that_succeeds_and_shows_the_hosts_gpu_is_ok_and_deleted(tmp_path):
    done = pod({"phase": "Succeeded", "conditions": [{"type": "PodScheduled", "status": "True"}]}, nodeName="gpu-1")
    result, argvs, logged = smoke(tmp_path, rules([[pod({"phase": "Pending"})], [done]], log=log_text(H100_L)),
                                  host=H100_HOST)
    assert (result["status"], result["changed"], result["deleted"]) == ("ok", False, True), result
    assert result["summary"] == ("nvidia_device_plugin: Succeeded; saw GPU 0: NVIDIA H100 80GB HBM3 "
                                 "(GPU-00000000-0000-0000-0000-000000000000)")
    (entry,) = result["pods"]
    whats = [s.get("what") or s["phase"] for s in entry["lifecycle"]]
    assert whats == ["created", "Pending", "Succeeded", "deleted"]
    # leftovers first, then the pod, then the deletion; the pod asked for the stack's resource on that node
    assert [a[0] for a in argvs if a[0] in ("delete", "create")] == ["delete", "create", "delete"]
    sent, probe = json.loads(next(c["stdin"] for c in logged if c["argv"][0] == "create"))["items"]
    assert sent["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert sent["metadata"]["labels"]["kube-gpu-nodes.io/smoke-node"] == "gpu-1"
    # beside it, the isolation probe: a pod on the same node that asks for nothing and sets NVIDIA_VISIBLE_DEVICES
    assert probe["metadata"]["name"] == "kgn-gpu-smoke-isolation-gpu-1"
    assert probe["spec"]["containers"][0]["resources"]["limits"] == {}
    assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"} in probe["spec"]["containers"][0]["env"]
    assert probe["metadata"]["labels"]["kube-gpu-nodes.io/smoke-node"] == "gpu-1"
    assert result["isolation"]["status"] == "not_run", result["isolation"]  # the fake API never shows it
    # one delete, then one read per poll until nothing is left (not a watch per object)
    assert next(a for a in argvs if a[0] == "delete")[-3:] == ["kube-gpu-nodes.io/smoke=pod,kube-gpu-nodes.io/"
                                                               "smoke-node=gpu-1", "--ignore-not-found",
                                                               "--wait=false"]


def test_a_pod_no_scheduler_acts_on_is_reported_with_the_lease_and_deleted(tmp_path):
    # what the lab's API server does: store the pod, no phase, no condition, no event
    result, argvs, _ = smoke(tmp_path, rules([[pod()]]), host=NO_GPU_HOST)
    assert result["status"] == "failed" and result["deleted"] is True
    (entry,) = result["pods"]
    assert entry["cause"] == "pod_not_scheduled"
    assert "not scheduled, no condition and no event from default-scheduler (no kube-scheduler holds the lease " \
           "kube-system/kube-scheduler)" in entry["summary"]
    assert entry["lifecycle"][0]["what"] == "created" and entry["lifecycle"][1]["phase"] == "Pending"
    assert entry["lifecycle"][-1]["what"] == "deleted"
    assert ["get", "leases.coordination.k8s.io", "-n", "kube-system", "kube-scheduler", "--output=json"] in argvs


def test_a_real_api_servers_defaulted_scheduler_name_still_reads_the_lease(tmp_path):
    # a real API server stores spec.schedulerName: default-scheduler on every pod that names none
    result, argvs, _ = smoke(tmp_path, rules([[pod(schedulerName="default-scheduler")]]), host=NO_GPU_HOST, timeout=1)
    assert result["pods"][0]["cause"] == "pod_not_scheduled"
    assert "(no kube-scheduler holds the lease kube-system/kube-scheduler)" in result["pods"][0]["summary"]
    assert ["get", "leases.coordination.k8s.io", "-n", "kube-system", "kube-scheduler", "--output=json"] in argvs


def test_with_no_scheduler_holding_the_lease_the_wait_ends_after_the_grace_not_at_the_timeout(tmp_path):
    result, argvs, _ = smoke(tmp_path, rules([[pod(schedulerName="default-scheduler")]]), host=NO_GPU_HOST,
                             timeout=120)
    (entry,) = result["pods"]
    assert entry["cause"] == "pod_not_scheduled" and "no kube-scheduler holds the lease" in entry["summary"]
    assert entry["lifecycle"][-1]["what"] == "deleted" and entry["lifecycle"][-1]["t"] < 10  # not 120 s
    assert argvs.count(["get", "leases.coordination.k8s.io", "-n", "kube-system", "kube-scheduler",
                        "--output=json"]) == 1  # read once, kept for the verdict


def test_a_held_lease_keeps_waiting_until_the_timeout(tmp_path):
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.000000Z")
    held = rules([[pod(schedulerName="default-scheduler")]])
    held[-1] = {"match": ["get", "leases.coordination.k8s.io"], "answers": [answer(json.dumps(
        {"kind": "Lease", "spec": {"holderIdentity": "cp1_1234", "renewTime": now}}))]}
    result, _, _ = smoke(tmp_path, held, host=NO_GPU_HOST, timeout=5)
    (entry,) = result["pods"]
    assert entry["cause"] == "pod_not_scheduled" and "last renewed" in entry["summary"] and "by cp1_1234" in \
        entry["summary"]
    assert entry["summary"].startswith("Pending after 5 s")  # the whole timeout: a live scheduler may still act


def test_insufficient_on_a_gpu_less_node_ends_early_as_no_gpu_visible(tmp_path):
    pending = pod({"phase": "Pending", "conditions": [{
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
        "message": "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) didn't match Pod's node "
                   "affinity/selector."}]})
    result, argvs, _ = smoke(tmp_path, rules([[pending]]), host=NO_GPU_HOST, timeout=60)
    assert result["status"] == "no_gpu" and result["pods"][0]["summary"].startswith("no GPU visible: Pending, 0/2")
    assert argvs.count(["get", "pods", "-n", "default", "-l", "kube-gpu-nodes.io/smoke=pod,kube-gpu-nodes.io/"
                        "smoke-node=gpu-1", "--output=json"]) == 1  # no waiting once nothing can change


def test_an_api_that_does_not_answer_skips_and_creates_nothing(tmp_path):
    refused = "The connection to the server 127.0.0.1:6443 was refused - did you specify the right host or port?"
    down = [{"match": ["delete"], "answers": [answer(rc=1, stderr=refused)]}]
    result, argvs, _ = smoke(tmp_path, down)
    assert result["status"] == "skipped" and "no API (kubectl on cp1): The connection" in result["summary"]
    assert [a[0] for a in argvs] == ["delete"]


def test_a_pod_the_api_refuses_is_named_and_check_mode_creates_nothing(tmp_path):
    refused = rules([[]])
    refused[1] = {"match": ["create"], "answers": [answer(rc=1, stderr='Error from server (NotFound): error when '
                                                                       'creating "STDIN": namespaces "gpu" not found')]}
    result, _, _ = smoke(tmp_path, refused, namespace="gpu")
    assert result["pods"][0]["cause"] == "pod_create_failed" and 'namespaces "gpu" not found' in result["summary"]
    checked, argvs, _ = smoke(tmp_path / "check", rules([[pod()]]), check=True)
    assert checked["status"] == "skipped" and argvs == []


def test_a_pod_left_in_the_api_fails_the_smoke(tmp_path):
    done = pod({"phase": "Succeeded"}, nodeName="gpu-1")
    steps = rules([[done]], log=log_text(H100_L))
    steps[2] = {"match": ["get", "--output=name"], "answers": [answer(""), answer(f"pod/{NAME}\n")]}  # none before
    result, argvs, _ = smoke(tmp_path, steps, host=H100_HOST, delete_timeout=1)
    assert result["status"] == "failed" and result["deleted"] is False and result["cause"] == "pod_not_deleted"
    assert result["summary"].endswith(f"the smoke pods could not be deleted (still there 1 s after the delete: "
                                      f"pod/{NAME})")
    assert [a[0] for a in argvs].count("delete") == 2 and [a[0] for a in argvs].count("get") >= 4  # read per poll


DRA_NAME = "kgn-gpu-smoke-nvidia-dra-gpu-1"
DRIVER_STATE = {"live": {"nvidia_smi": {"answered": True}, "gpu": {"gpu_present": True, "gpus": [
    {"index": 0, "product_name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-00000000-0000-0000-0000-000000000000"}]}}}


def test_a_dra_node_gets_its_gpu_through_a_claim_template_compared_with_the_recorded_gpus(tmp_path):
    done = pod({"phase": "Succeeded"}, nodeName="gpu-1")
    done["metadata"]["name"] = DRA_NAME
    steps = rules([[done]], log=log_text(H100_L))
    steps[1] = {"match": ["create"], "answers": [answer(f"resourceclaimtemplate.resource.k8s.io/{DRA_NAME}\n"
                                                        f"pod/{DRA_NAME}\n")]}
    result, argvs, logged = smoke(tmp_path, steps, stacks=["nvidia_dra"], resource_api="resource.k8s.io/v1beta1",
                                  driver_state=DRIVER_STATE)
    assert (result["status"], result["deleted"]) == ("ok", True), result
    template, sent, _ = json.loads(next(c["stdin"] for c in logged if c["argv"][0] == "create"))["items"]
    assert (template["kind"], template["apiVersion"]) == ("ResourceClaimTemplate", "resource.k8s.io/v1beta1")
    assert template["spec"]["spec"]["devices"]["requests"] == [{"name": "gpu", "deviceClassName": "gpu.nvidia.com"}]
    assert sent["spec"]["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": DRA_NAME}]
    # the claim templates are deleted with the pods (and looked for as leftovers first)
    deletes = [a for a in argvs if a[0] == "delete"]
    assert len(deletes) == 2 and all(a[1] == "pods,resourceclaimtemplates.resource.k8s.io" for a in deletes)


def test_a_dra_node_whose_resource_api_is_not_recorded_is_skipped_with_the_reason(tmp_path):
    result, argvs, _ = smoke(tmp_path, rules([[]]), stacks=["nvidia_dra"])
    assert result["status"] == "skipped" and argvs == []
    assert "resource.k8s.io version is not recorded" in result["summary"]


NAME2 = "kgn-gpu-smoke-nvidia-device-plugin-gpu-2"


def test_the_smokes_of_several_nodes_run_at_once_with_one_create_one_read_per_poll_and_one_delete(tmp_path):
    done1 = pod({"phase": "Succeeded"}, nodeName="gpu-1")
    stuck = pod({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
                                                      "reason": "Unschedulable",
                                                      "message": "0/2 nodes are available: 1 Insufficient "
                                                                 "nvidia.com/gpu."}]})
    stuck["metadata"]["name"] = NAME2
    steps = rules([[done1, stuck]], log=log_text(H100_L))
    steps[1] = {"match": ["create"], "answers": [answer(f"pod/{NAME}\npod/{NAME2}\n")]}
    result, argvs, logged = smoke(tmp_path, steps, node_name=None, timeout=60,
                                  nodes=[{"node_name": "gpu-1", "host": H100_HOST},
                                         {"node_name": "gpu-2", "host": NO_GPU_HOST}])
    assert set(result["nodes"]) == {"gpu-1", "gpu-2"} and result["status"] == "no_gpu" and result["deleted"]
    assert result["nodes"]["gpu-1"]["status"] == "ok" and result["nodes"]["gpu-2"]["status"] == "no_gpu"
    assert result["summary"].startswith("gpu-1: nvidia_device_plugin: Succeeded")
    selector = "kube-gpu-nodes.io/smoke=pod,kube-gpu-nodes.io/smoke-node in (gpu-1,gpu-2)"
    # one create with both pods, one read (nothing left to wait for), one events list, both deleted together
    assert [a[0] for a in argvs].count("create") == 1
    sent = json.loads(next(c["stdin"] for c in logged if c["argv"][0] == "create"))["items"]
    assert [(o["metadata"]["labels"]["kube-gpu-nodes.io/smoke-node"], o["metadata"]["name"].split("-")[3])
            for o in sent] == [("gpu-1", "nvidia"), ("gpu-1", "isolation"), ("gpu-2", "nvidia"), ("gpu-2", "isolation")]
    assert argvs.count(["get", "pods", "-n", "default", "-l", selector, "--output=json"]) == 1
    assert [a for a in argvs if a[:2] == ["get", "events"]] == [
        ["get", "events", "-n", "default", "--field-selector", "involvedObject.kind=Pod", "--output=json"]]
    assert [a[-3] for a in argvs if a[0] == "delete"] == [selector, selector]


def test_a_pod_of_one_node_the_api_refuses_fails_that_node_only(tmp_path):
    done2 = pod({"phase": "Succeeded"}, nodeName="gpu-2")
    done2["metadata"]["name"] = NAME2
    steps = rules([[done2]], log=log_text(H100_L))
    steps[1] = {"match": ["create"], "answers": [answer(f"pod/{NAME2}\n", rc=1, stderr=(
        f'Error from server (Forbidden): error when creating "STDIN": pods "{NAME}" is forbidden: exceeded quota'))]}
    result, _, _ = smoke(tmp_path, steps, node_name=None, nodes=[{"node_name": "gpu-1"},
                                                                 {"node_name": "gpu-2", "host": H100_HOST}])
    one, two = result["nodes"]["gpu-1"], result["nodes"]["gpu-2"]
    assert one["pods"][0]["cause"] == "pod_create_failed" and "exceeded quota" in one["summary"]
    assert two["status"] == "ok", two


def test_node_name_and_nodes_are_one_or_the_other(tmp_path):
    result, argvs, _ = smoke(tmp_path, rules([[]]), nodes=[{"node_name": "gpu-2"}])
    assert result["status"] == "FAILED!" and "mutually exclusive: node_name|nodes" in result["msg"] and argvs == []
