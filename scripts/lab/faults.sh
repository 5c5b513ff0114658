#!/usr/bin/env bash
# The fault suite: each case breaks the converged lab the way production breaks, runs what a user runs,
# and checks the end state on the live nodes (not the files we wrote): the service runs on a valid
# config, nothing the user had is lost, the report names the cause, and a second run changes nothing.
#   scripts/lab/faults.sh CASE      one case (scripts/test.sh lab runs each as one test)
#   scripts/lab/faults.sh list      the cases
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
logs=$top/.cache/test-logs/faults
mkdir -p "$logs"
DOCKER_NODE=kgn-gpu-docker
CTRD_NODE=kgn-gpu-containerd

say() { printf 'fault: %s\n' "$*"; }
on() { local node=$1; shift; docker exec "$node" bash -c "$*"; }
fail() { say "FAILED: $*"; exit 1; }

run() {  # run NAME ansible-playbook-args...: run, keep the output in $logs/NAME.out, never stop the script
  local name=$1; shift
  set +e
  # no run of the suite takes 15 minutes: one that does hangs, and the case fails instead of the whole test run
  timeout 900 ansible-playbook "$@" >"$logs/$name.out" 2>&1
  local rc=$?
  [ $rc -ne 124 ] || echo "TIMEOUT: ansible-playbook ran past 900 s" >>"$logs/$name.out"
  set -e
  say "ansible-playbook $* -> exit $rc (log $logs/$name.out)"
  return 0
}

ok_run() {  # ok_run NAME args...: the run must succeed
  local name=$1
  run "$@"
  scripts/check-recap.py --hosts "$logs/$name.out" >/dev/null
  grep -qE 'failed=[1-9]|unreachable=[1-9]' "$logs/$name.out" && fail "$name: a host failed (see $logs/$name.out)"
  return 0
}

unchanged() {  # unchanged NAME args...: a second run must report changed=0 on every host
  local name=$1
  ok_run "$@"
  scripts/check-recap.py --unchanged "$logs/$name.out" || fail "$name: the second run changed something"
}

said() {  # said NAME TEXT: the run's output says TEXT
  grep -qF -- "$2" "$logs/$1.out" || fail "$1: the output does not say '$2' (see $logs/$1.out)"
}

case_runtime_binary_gone() {
  say "the runtime binary Docker is told to run is deleted by hand"
  on $DOCKER_NODE 'rm -f /usr/bin/nvidia-container-runtime'
  ok_run binary-gone playbooks/nvidia_container_runtime.yml --limit $DOCKER_NODE
  on $DOCKER_NODE 'nvidia-container-runtime --version >/dev/null' || fail "the binary is not back"
  on $DOCKER_NODE 'docker info --format "{{.DefaultRuntime}}" | grep -qx nvidia' || fail "Docker's default is not nvidia"
  said binary-gone "nvidia-container-runtime"
  unchanged binary-gone-again playbooks/nvidia_container_runtime.yml --limit $DOCKER_NODE
}

case_containerd_stopped() {
  say "containerd is stopped; verify must say so, the next run must start it"
  on $CTRD_NODE 'systemctl stop containerd'
  run stopped-verify playbooks/verify.yml --limit "$CTRD_NODE:localhost"
  python3 - "$top/reports/latest/report.json" $CTRD_NODE <<'PY' || fail "the report does not fail the stopped engine"
import json, sys
row = next(r for r in json.load(open(sys.argv[1]))["rows"] if r["host"] == sys.argv[2])
assert row["verdict"] == "failed", row["verdict"]
assert any(c["status"] == "failed" and "containerd" in json.dumps(c) for c in row["checks"]), row["checks"]
PY
  ok_run stopped-repair playbooks/nvidia_container_runtime.yml --limit $CTRD_NODE
  on $CTRD_NODE 'systemctl is-active --quiet containerd && ctr --timeout 5s version >/dev/null' || fail "containerd is not back"
  said stopped-repair "containerd is not running"
  unchanged stopped-again playbooks/nvidia_container_runtime.yml --limit $CTRD_NODE
}

restore_daemon() { on $DOCKER_NODE 'mv /root/daemon.json.fault /etc/docker/daemon.json'; }

case_report_names_the_cause() {
  say "daemon.json is broken by hand: the run fails on that node, the others go on, and the report says why"
  on $DOCKER_NODE 'cp -p /etc/docker/daemon.json /root/daemon.json.fault && printf "{\n  \"log-driver\": \"json-file\"\n  \"bad\": 1\n}\n" > /etc/docker/daemon.json'
  # the whole lab: Ansible ends a playbook whose play has no host left, so the report needs a host that runs on
  run cause site.yml
  on $DOCKER_NODE 'grep -q "\"bad\": 1" /etc/docker/daemon.json' || { restore_daemon; fail "the user's broken file was changed"; }
  python3 - "$top/reports/latest/report.json" $DOCKER_NODE <<'PY' || { restore_daemon; fail "the report row does not carry the cause"; }
import json, sys
row = next(r for r in json.load(open(sys.argv[1]))["rows"] if r["host"] == sys.argv[2])
text = json.dumps(row)
assert row["verdict"] == "failed" and "is not valid JSON: line 3" in text, text
PY
  restore_daemon
  unchanged cause-again playbooks/nvidia_container_runtime.yml --limit $DOCKER_NODE
}

case_disk_full() {
  say "the disk is full while the containerd drop-in is written: the old files stay, containerd keeps running"
  on $CTRD_NODE 'cp -a /etc/containerd/conf.d /root/conf.d.fault && rm -f /etc/containerd/conf.d/99-nvidia.toml &&
    mount -t tmpfs -o size=16k tmpfs /etc/containerd/conf.d && dd if=/dev/zero of=/etc/containerd/conf.d/.fill bs=4k count=8 2>/dev/null || true'
  run full playbooks/nvidia_container_runtime.yml --limit $CTRD_NODE
  said full "No space left on device"
  on $CTRD_NODE 'systemctl is-active --quiet containerd && ctr --timeout 5s version >/dev/null' || fail "containerd stopped"
  on $CTRD_NODE 'umount /etc/containerd/conf.d'
  ok_run full-repair playbooks/nvidia_container_runtime.yml --limit $CTRD_NODE
  on $CTRD_NODE 'test -s /etc/containerd/conf.d/99-nvidia.toml' || fail "the drop-in is not back"
  unchanged full-again playbooks/nvidia_container_runtime.yml --limit $CTRD_NODE
}

case_package_removed() {
  say "the toolkit package is removed by hand"
  on $CTRD_NODE 'dpkg --purge --force-depends nvidia-container-toolkit >/dev/null 2>&1'
  ok_run removed playbooks/nvidia_container_runtime.yml --limit $CTRD_NODE
  on $CTRD_NODE 'dpkg -s nvidia-container-toolkit | grep -q "^Status: .* installed"' || fail "not reinstalled"
  on $CTRD_NODE 'apt-mark showhold | grep -qx nvidia-container-toolkit' || fail "not held again"
  unchanged removed-again playbooks/nvidia_container_runtime.yml --limit $CTRD_NODE
}

case_concurrent_runs() {
  say "two runs change the same node at the same time"
  on $CTRD_NODE 'rm -f /etc/containerd/conf.d/99-nvidia.toml'
  run concurrent-1 playbooks/nvidia_container_runtime.yml --limit $CTRD_NODE &
  local first=$!
  sleep 1
  run concurrent-2 playbooks/nvidia_container_runtime.yml --limit $CTRD_NODE
  wait $first
  for n in concurrent-1 concurrent-2; do
    grep -qE 'failed=[1-9]|unreachable=[1-9]' "$logs/$n.out" && fail "$n failed"
  done
  on $CTRD_NODE 'test -s /etc/containerd/conf.d/99-nvidia.toml && systemctl is-active --quiet containerd' || fail "not converged"
  unchanged concurrent-again playbooks/nvidia_container_runtime.yml --limit $CTRD_NODE
}

case_scheduler_restart_interrupted() {
  say "a run stopped between writing the scheduler config and restarting the scheduler"
  on kgn-cp-kubeasz 'touch /etc/kubernetes/scheduler-policy-config.yaml'
  ok_run interrupted playbooks/kube_scheduler_extender.yml --limit kgn-cp-kubeasz
  scripts/check-recap.py --unchanged "$logs/interrupted.out" && fail "the pending restart was not finished"
  on kgn-cp-kubeasz 'pid=$(systemctl show -p MainPID --value kube-scheduler); [ "$(stat -c %Y /proc/$pid)" -ge "$(stat -c %Y /etc/kubernetes/scheduler-policy-config.yaml)" ]' \
    || fail "the running scheduler is older than its config"
  unchanged interrupted-again playbooks/kube_scheduler_extender.yml --limit kgn-cp-kubeasz
}

case_stack_removed() {
  say "gpushare is taken out of the kubeasz cluster's inventory"
  ok_run removed-stack site.yml --limit 'lab_kubeasz:localhost' -e '{"gpu_sharing_stacks": []}'
  on kgn-cp-kubeasz 'pid=$(systemctl show -p MainPID --value kube-scheduler); test "$pid" -gt 0 &&
    ! tr "\0" " " < /proc/$pid/cmdline | grep -q -- "--config"' || fail "the scheduler still runs our config"
  on kgn-cp-kubeasz '! test -e /etc/systemd/system/kube-scheduler.service.d/90-kube-gpu-nodes-scheduler-config.conf' \
    || fail "our drop-in is still there"
  on kgn-cp-kubeasz 'kubectl --kubeconfig /etc/kubernetes/admin.conf -n kube-system get daemonset -o name | grep -q gpushare' \
    && fail "the gpushare DaemonSet is still deployed"
  on kgn-cp-kubeasz "kubectl --kubeconfig /etc/kubernetes/admin.conf get node $DOCKER_NODE -o jsonpath='{.metadata.labels}' | grep -q gpushare" \
    && fail "the gpushare label is still on the node"
  unchanged removed-stack-again site.yml --limit 'lab_kubeasz:localhost' -e '{"gpu_sharing_stacks": []}'
  ok_run removed-stack-back site.yml --limit 'lab_kubeasz:localhost'
}

case_config_unreadable() {
  say "the scheduler's config is overwritten with bytes that are not text and kube-scheduler restarted on it"
  local config=/etc/kubernetes/scheduler-policy-config.yaml
  on kgn-cp-kubeasz "cp -p $config /root/scheduler-config.fault && head -c 300 /dev/urandom > $config &&
    sha256sum $config > /root/scheduler-config.damaged && systemctl restart kube-scheduler || true"
  # the scheduler step alone (what a failed control plane does to the rest of the run: control_plane_fails)
  run unreadable playbooks/kube_scheduler_extender.yml --limit kgn-cp-kubeasz
  said unreadable "$config is not UTF-8 text"
  grep -qE 'kgn-cp-kubeasz +: .*failed=1' "$logs/unreadable.out" || fail "unreadable: the refusal did not fail the host"
  on kgn-cp-kubeasz 'sha256sum -c --quiet /root/scheduler-config.damaged' || fail "the damaged file was changed"
  on kgn-cp-kubeasz "mv /root/scheduler-config.fault $config"
  ok_run unreadable-repair playbooks/kube_scheduler_extender.yml --limit kgn-cp-kubeasz
  on kgn-cp-kubeasz 'pid=$(systemctl show -p MainPID --value kube-scheduler); test "$pid" -gt 0 &&
    tr "\0" " " < /proc/$pid/cmdline | grep -q -- "--config='"$config"'"' || fail "kube-scheduler is not back on its config"
  unchanged unreadable-again playbooks/kube_scheduler_extender.yml --limit kgn-cp-kubeasz
}

case_foreign_device_plugin() {
  say "a device plugin this project did not deploy (a stand-in for a managed add-on) already serves nvidia.com/gpu"
  local kubectl='kubectl --kubeconfig /etc/kubernetes/admin.conf -n kube-system'
  ok_run foreign-create lab/playbooks/foreign_device_plugin.yml --limit kgn-cp-kubeadm
  run foreign playbooks/gpu_sharing_stacks.yml --limit 'kgn-cp-kubeadm:localhost'
  said foreign "Refused to deploy a second device plugin: DaemonSet kube-system/nvidia-gpu-device-plugin"
  said foreign "set gpu_sharing_stacks_existing_device_plugin: adopt"
  on kgn-cp-kubeadm "$kubectl get daemonset -l app.kubernetes.io/managed-by=kube-gpu-nodes -o name | grep -q ." \
    || fail "the refusal removed our own device plugin"
  ok_run foreign-adopt playbooks/gpu_sharing_stacks.yml --limit 'kgn-cp-kubeadm:localhost' \
    -e gpu_sharing_stacks_existing_device_plugin=adopt
  on kgn-cp-kubeadm "$kubectl get daemonset nvidia-gpu-device-plugin -o name >/dev/null" || fail "the adopted one is gone"
  on kgn-cp-kubeadm "! $kubectl get daemonset -l kube-gpu-nodes.io/stack=nvidia_device_plugin -o name | grep -q ." \
    || fail "ours still runs beside the adopted one"
  unchanged foreign-adopt-again playbooks/gpu_sharing_stacks.yml --limit 'kgn-cp-kubeadm:localhost' \
    -e gpu_sharing_stacks_existing_device_plugin=adopt
  ok_run foreign-remove lab/playbooks/foreign_device_plugin.yml --limit kgn-cp-kubeadm -e lab_foreign=remove
  ok_run foreign-back playbooks/gpu_sharing_stacks.yml --limit 'kgn-cp-kubeadm:localhost'
  on kgn-cp-kubeadm "$kubectl get daemonset -l kube-gpu-nodes.io/stack=nvidia_device_plugin -o name | grep -q ." \
    || fail "our device plugin is not back"
}

case_drain_blocked_by_budget() {
  say "a GPU job whose PodDisruptionBudget allows no eviction: the planned driver upgrade's drain stops naming the budget"
  local kubectl='kubectl --kubeconfig /etc/kubernetes/admin.conf -n default' version
  docker exec -i kgn-cp-kubeadm $kubectl apply -f - >/dev/null <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: kgn-lab-train, labels: {app: kgn-lab-train}}
spec:
  replicas: 1
  selector: {matchLabels: {app: kgn-lab-train}}
  template:
    metadata: {labels: {app: kgn-lab-train}}
    spec:
      nodeSelector: {kubernetes.io/hostname: $CTRD_NODE}
      terminationGracePeriodSeconds: 1
      containers:
      - {name: train, image: kgn-lab/gpu-smoke:local, imagePullPolicy: Never, command: [sleep, "3600"],
         resources: {limits: {nvidia.com/gpu: 1}}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: kgn-lab-train}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: kgn-lab-train}}
YAML
  on kgn-cp-kubeadm "$kubectl rollout status deployment/kgn-lab-train --timeout=90s >/dev/null" \
    || fail "the GPU job did not start on $CTRD_NODE (the stand-in device plugin, the real kubelet)"
  version=$(on $CTRD_NODE "dpkg-query -W -f='\${Version}' nvidia-driver | sed 's/-[^-]*\$//'")
  run drain-blocked playbooks/nvidia_driver_upgrade.yml --limit $CTRD_NODE -e gpu_driver_version="$version" \
    -e kgn_upgrade_drain_timeout=15
  grep -qE "^$CTRD_NODE +: .*failed=1" "$logs/drain-blocked.out" || fail "the blocked drain did not fail the node"
  said drain-blocked "PodDisruptionBudget default/kgn-lab-train allows no disruption now"
  said drain-blocked "The node stays cordoned (cordoned by this run)"
  on kgn-cp-kubeadm "$kubectl get pods -l app=kgn-lab-train -o jsonpath='{.items[*].spec.nodeName}' | grep -qx $CTRD_NODE" \
    || fail "the job's pod was evicted past its budget"
  # undone as an operator would: the budget relaxed, the node the failed run left cordoned made schedulable again
  # (the run said so: a later run only uncordons a node it cordoned itself), the upgrade run again: it cordons,
  # drains, changes no driver, uncordons
  on kgn-cp-kubeadm "$kubectl delete pdb kgn-lab-train >/dev/null && $kubectl uncordon $CTRD_NODE >/dev/null"
  ok_run drain-after playbooks/nvidia_driver_upgrade.yml --limit $CTRD_NODE -e gpu_driver_version="$version" \
    -e kgn_upgrade_drain_timeout=60
  on kgn-cp-kubeadm "$kubectl delete deployment kgn-lab-train --wait=true >/dev/null"
  [ "$(on kgn-cp-kubeadm "kubectl --kubeconfig /etc/kubernetes/admin.conf get node $CTRD_NODE \
      -o jsonpath='{.spec.unschedulable}'")" != true ] || fail "$CTRD_NODE is still cordoned after the run that drained it"
  unchanged drain-again playbooks/nvidia_driver.yml --limit $CTRD_NODE
}

says() {  # says NAME TEXT: the run's output says TEXT, however the callback wrapped and quoted the line
  python3 - "$logs/$1.out" "$2" <<'PY' || fail "$1: the output does not say '$2' (see $logs/$1.out)"
import sys
text = " ".join(open(sys.argv[1]).read().replace("''", "'").split())
sys.exit(0 if " ".join(sys.argv[2].split()) in text else 1)
PY
}

case_containerd_later_import() {
  say "a user's containerd file, imported after ours, sets the default runtime back to runc: named, kept, not fought"
  local config=/etc/containerd/config.toml user=/etc/containerd/conf.d/zz-runc.toml sum
  on $CTRD_NODE "cp -p $config /root/config.toml.fault
    python3 - $config <<'PY'
import re, sys
text = open(sys.argv[1]).read()
text = re.sub(r'(?ms)^imports = \\[.*?\\]', 'imports = [\"/etc/containerd/conf.d/*.toml\"]', text, count=1)
open(sys.argv[1], 'w').write(text)
PY
    grep -q 'conf.d/\*.toml' $config
    printf 'version = 3\n[plugins.\"io.containerd.cri.v1.runtime\".containerd]\n  default_runtime_name = \"runc\"\n' > $user
    systemctl restart containerd"
  [ "$(cri $CTRD_NODE 'print(c["containerd"]["defaultRuntimeName"])')" = runc ] \
    || fail "the user's file did not make runc the default"
  sum=$(on $CTRD_NODE "sha256sum $user")
  run later-import playbooks/nvidia_container_runtime.yml --limit $CTRD_NODE
  grep -qE "^$CTRD_NODE +: .*failed=1" "$logs/later-import.out" || fail "the run did not refuse the later file"
  says later-import "$user sets plugins.\"io.containerd.cri.v1.runtime\".containerd.default_runtime_name = \"runc\""
  says later-import "This project does not override a later file"
  [ "$(on $CTRD_NODE "sha256sum $user")" = "$sum" ] || fail "the user's file was changed"
  run later-import-verify playbooks/verify.yml --limit "$CTRD_NODE:localhost"
  row_says $CTRD_NODE '
text = json.dumps(checks["runtime_default"])
assert checks["runtime_default"]["status"] == "failed" and "zz-runc.toml" in text, text
assert checks["runtime_default"]["diagnosis"][0]["id"] == "containerd_default_set_later", text' \
    || fail "verify does not name the later file as the cause"
  # undone as the user would: their file removed, config.toml as it was, containerd restarted
  on $CTRD_NODE "rm -f $user && cp -p /root/config.toml.fault $config && systemctl restart containerd"
  unchanged later-import-again playbooks/nvidia_container_runtime.yml --limit $CTRD_NODE
}

case_daemon_json_symlinked() {
  say "daemon.json is a link into a folder config management owns, and lost nvidia: the target is edited, the link kept"
  on $DOCKER_NODE 'cp -p /etc/docker/daemon.json /root/daemon.json.fault && mkdir -p /etc/docker-managed &&
    python3 -c "import json; d = json.load(open(\"/etc/docker/daemon.json\")); d.pop(\"default-runtime\", None)
d.get(\"runtimes\", {}).pop(\"nvidia\", None); json.dump(d, open(\"/etc/docker-managed/daemon.json\", \"w\"), indent=2)" &&
    ln -sfn /etc/docker-managed/daemon.json /etc/docker/daemon.json && systemctl restart docker'
  ok_run symlink playbooks/nvidia_container_runtime.yml --limit $DOCKER_NODE
  on $DOCKER_NODE 'test -L /etc/docker/daemon.json && test "$(readlink /etc/docker/daemon.json)" = /etc/docker-managed/daemon.json' \
    || fail "the link was replaced"
  on $DOCKER_NODE 'grep -q "\"default-runtime\": \"nvidia\"" /etc/docker-managed/daemon.json' || fail "the target lacks nvidia"
  on $DOCKER_NODE 'docker info --format "{{.DefaultRuntime}}" | grep -qx nvidia' || fail "Docker's default is not nvidia"
  says symlink "/etc/docker/daemon.json is a symlink to /etc/docker-managed/daemon.json: the target was edited, the link kept"
  unchanged symlink-again playbooks/nvidia_container_runtime.yml --limit $DOCKER_NODE
  # undone: a plain file again, as the lab had it (same text): nothing to change
  on $DOCKER_NODE 'cp -p --remove-destination /etc/docker-managed/daemon.json /etc/docker/daemon.json && rm -rf /etc/docker-managed'
  unchanged symlink-undone playbooks/nvidia_container_runtime.yml --limit $DOCKER_NODE
}

row_says() {  # row_says HOST PYTHON [ARG...]: assert PYTHON on HOST's row of the latest report (row; checks by id;
  # the ARGs from sys.argv[4])
  python3 - "$top/reports/latest/report.json" "$@" <<'PY'
import json, sys
row = next(r for r in json.load(open(sys.argv[1]))["rows"] if r["host"] == sys.argv[2])
checks = {c["id"]: c for c in row["checks"]}
exec(sys.argv[3])
PY
}

case_node_hangs() {
  say "a GPU node freezes mid-run (its container paused: a hung mount, a stuck kernel): it fails alone at kgn_task_timeout"
  local start took
  start=$(date +%s)
  # frozen while a module of the run is in flight on it, deep in a command it runs (a node paused between two tasks
  # refuses the next exec at once, which is a failure, not a hang)
  ( for _ in $(seq 3000); do
      docker top $DOCKER_NODE -eo pid,args 2>/dev/null | grep -qE '[d]pkg-query|[a]pt-cache|[a]pt-get|[d]ocker (info|run)' \
        && { docker pause $DOCKER_NODE >/dev/null; exit; }
      sleep 0.05
    done ) &
  # the bound is 120 s here (the roles' own waits below it, as the first play requires); a run that hung for ever
  # would be stopped by timeout(1) in run and fail the case
  run hang site.yml -e '{"kgn_task_timeout": 120, "nvidia_driver_reboot_timeout": 100, "nvidia_mig_drain_timeout": 100,
    "kube_scheduler_extender_health_timeout": 100}'
  wait
  docker unpause $DOCKER_NODE >/dev/null 2>&1 || fail "the node was never frozen (no command of the run seen on it)"
  took=$(( $(date +%s) - start ))
  say "the run ended by itself after $took s"
  grep -q "^TIMEOUT" "$logs/hang.out" && fail "the run did not end by itself"
  grep -qE "^$DOCKER_NODE +: .*failed=1" "$logs/hang.out" || fail "the frozen node did not fail"
  for host in kgn-cp-kubeadm kgn-cp-kubeasz $CTRD_NODE; do
    grep -qE "^$host +: .* failed=0 " "$logs/hang.out" || fail "$host did not converge beside the frozen node"
  done
  row_says $DOCKER_NODE '
first = row["checks"][0]
assert row["verdict"] == "failed" and first["id"] == "host_reached", first
assert first["summary"].startswith("hung: ") and "did not finish within 120 s" in first["summary"], first["summary"]
assert first["diagnosis"][0]["id"] == "host_timed_out", first["diagnosis"]' || fail "the report does not say the node hung"
  ok_run hang-repair site.yml --limit "$DOCKER_NODE:kgn-cp-kubeasz:localhost"
  unchanged hang-again site.yml --limit "$DOCKER_NODE:kgn-cp-kubeasz:localhost"
}

api_answers() {  # api_answers: wait until the kubeadm cluster's API server says it is ready (a minute at most)
  on kgn-cp-kubeadm 'for i in $(seq 90); do kubectl --kubeconfig /etc/kubernetes/admin.conf get --raw /readyz \
    >/dev/null 2>&1 && exit 0; sleep 1; done; exit 1'
}

settled() {  # settled: after an outage, the kubeadm cluster's kube-scheduler holds its lease again (it exits when it
  # loses it, and its kubelet restarts it with a back-off) and its GPU node is Ready (three minutes at most)
  on kgn-cp-kubeadm 'k="kubectl --kubeconfig /etc/kubernetes/admin.conf"; for i in $(seq 180); do
    renew=$($k -n kube-system get lease kube-scheduler -o jsonpath={.spec.renewTime} 2>/dev/null)
    ready=$($k get node '"$CTRD_NODE"' -o jsonpath="{.status.conditions[?(@.type==\"Ready\")].status}" 2>/dev/null)
    if [ -n "$renew" ] && [ $(( $(date +%s) - $(date -d "$renew" +%s) )) -lt 15 ] && [ "$ready" = True ]; then
      exit 0; fi
    sleep 1; done; exit 1'
}

api_row_failed() {  # api_row_failed RUN WORDS: every host of the kubeadm cluster fails api_answers, naming the server
  local host
  for host in kgn-cp-kubeadm $CTRD_NODE; do
    row_says $host '
row_text = json.dumps(checks.get("api_answers"))
assert row["verdict"] == "failed", row["verdict"]
assert checks["api_answers"]["status"] == "failed" and ":6443" in checks["api_answers"]["summary"], row_text
assert any(w in row_text for w in sys.argv[4].split("|")), row_text' "$2" \
      || fail "$1: the report row of $host does not fail the API server with its address and words"
  done
}

case_api_server_down() {
  say "the kubeadm cluster's API server is stopped, then frozen: the report fails its hosts, naming the server"
  local manifest=/etc/kubernetes/manifests/kube-apiserver.yaml hosts="lab_kubeadm:localhost"
  on kgn-cp-kubeadm "mv $manifest /root/kube-apiserver.yaml.fault"
  on kgn-cp-kubeadm 'for i in $(seq 60); do pgrep -x kube-apiserver >/dev/null || exit 0; sleep 1; done; exit 1' \
    || { on kgn-cp-kubeadm "mv /root/kube-apiserver.yaml.fault $manifest"; fail "kube-apiserver did not stop"; }
  run api-stopped site.yml --limit "$hosts"
  on kgn-cp-kubeadm "mv /root/kube-apiserver.yaml.fault $manifest"
  api_row_failed api-stopped "refused"
  api_answers || fail "the API server did not come back"
  # frozen: the process is there and takes connections, but answers nothing (its kubelet stopped first, so that
  # its liveness probe does not restart it mid-run)
  on kgn-cp-kubeadm 'systemctl stop kubelet && pkill -STOP -x kube-apiserver'
  run api-frozen site.yml --limit "$hosts"
  on kgn-cp-kubeadm 'pkill -CONT -x kube-apiserver; systemctl start kubelet'
  api_row_failed api-frozen "Timeout|timeout|deadline|i/o timeout"
  settled || fail "the control plane did not settle after the outage"
  unchanged api-again site.yml --limit "$hosts"
}

smoke_checks() {  # smoke_checks NODE:ENGINE_STATUS:ENGINE_CAUSE...: GPU nodes' smoke checks in the latest report
  python3 - "$top/reports/latest/report.json" "$@" <<'PY'
import json, sys
report, wanted = sys.argv[1], [w.split(":") for w in sys.argv[2:]]
rows = {r["host"]: r for r in json.load(open(report))["rows"]}
# both clusters are real: the kubeasz one (1.22.3) has no kubelet, so its real scheduler refuses the smoke pod (no GPU
# resource, the node not ready): waived on that cluster; the kubeadm one (1.36.3) places it on the node's stand-in
# nvidia.com/gpu, its real kubelet runs it, and the pod sees no GPU (there is none)
NO_KUBELET = {"kgn-gpu-docker"}
for node, status, cause in wanted:
    checks = {c["id"]: c for c in rows[node]["checks"]}
    engine, pod = checks["engine_smoke"], checks["pod_smoke"]
    print(f"{node}: smoke column: {rows[node]['smoke']}; verdict {rows[node]['verdict']}")
    print(f"  engine_smoke {engine['status']}: {engine['summary']}")
    print(f"  pod_smoke {pod['status']}: {pod['summary']}")
    assert engine["status"] == status and [d["id"] for d in engine["diagnosis"]] == [f"smoke_{cause}"], engine
    assert engine["evidence"]["cleanup"]["gone"], engine["evidence"]
    if node in NO_KUBELET:
        assert pod["status"] == "waived" and "0/2 nodes are available" in pod["summary"], pod
        assert rows[node]["smoke"].endswith("pod: - (waived: pod unschedulable)"), rows[node]["smoke"]
    else:
        phases = [p["phase"] for p in pod["evidence"]["pods"]]
        assert pod["status"] in ("warn", "failed") and set(phases) <= {"Succeeded", "Failed"}, pod
    assert pod["evidence"]["deleted"] and pod["evidence"]["pods"][0]["lifecycle"][-1]["what"] == "deleted", pod
PY
}

standin_calls() {  # standin_calls NODE SINCE_LINE: what the stand-in nvidia-container-runtime logged since that line
  on "$1" "tail -n +$(($2 + 1)) /var/log/nvidia-container-runtime-standin.log 2>/dev/null || true"
}

case_runtime_injects_nothing() {
  say "the nvidia runtime binary is swapped for one that runs runc and injects nothing: only the engine smoke sees it"
  local node kubectl='kubectl --kubeconfig /etc/kubernetes/admin.conf' limit="$DOCKER_NODE:$CTRD_NODE:localhost"
  declare -A mark
  for node in $DOCKER_NODE $CTRD_NODE; do
    on $node 'cp -p /usr/bin/nvidia-container-runtime /root/nvidia-container-runtime.fault &&
      printf "#!/bin/sh\nexec runc \"\$@\"\n" >/usr/bin/nvidia-container-runtime'
  done
  run smoke-fault playbooks/verify.yml --limit "$limit"
  # The Docker node runs the legacy mode: the runtime binary is what injects the GPUs, so the smoke sees the swap.
  # The containerd node runs CDI: containerd injects the spec's devices itself (ctr --device) before any runtime
  # runs, so the swap changes nothing the smoke sees there (here the spec's /dev/nvidia* do not exist: no GPU).
  smoke_checks "$DOCKER_NODE:failed:no_device_injected" "$CTRD_NODE:warn:no_gpu_visible" \
    || fail "the swapped runtime is not reported by the engine smoke"
  said smoke-fault "the GPU request was ignored"
  ok_run smoke-repair playbooks/nvidia_container_runtime.yml --limit "$DOCKER_NODE:$CTRD_NODE"
  said smoke-repair "/usr/bin/nvidia-container-runtime differs from the package"
  for node in $DOCKER_NODE $CTRD_NODE; do
    mark[$node]=$(on $node 'wc -l </var/log/nvidia-container-runtime-standin.log 2>/dev/null || echo 0')
  done
  ok_run smoke-repaired playbooks/verify.yml --limit "$limit"
  smoke_checks "$DOCKER_NODE:warn:no_gpu_visible" "$CTRD_NODE:warn:no_gpu_visible" \
    || fail "after the repair the smoke rows are not 'no GPU visible' again"
  calls=$(standin_calls $DOCKER_NODE "${mark[$DOCKER_NODE]}")
  for call in " create " " start " " delete " "injected /usr/bin/nvidia-smi"; do
    grep -qF -- "$call" <<<"$calls" || fail "$DOCKER_NODE: the stand-in runtime logged no '$call' for the smoke container"
  done
  for node in $DOCKER_NODE $CTRD_NODE; do
    on $node '! docker ps -aq --filter name=kgn-gpu-smoke 2>/dev/null | grep -q . &&
      ! ctr -n k8s.io containers list -q 2>/dev/null | grep -qx kgn-gpu-smoke' || fail "$node: a smoke container is left"
  done
  for node in kgn-cp-kubeadm kgn-cp-kubeasz; do
    on $node "! $kubectl get pods -A -l kube-gpu-nodes.io/smoke -o name | grep -q ." || fail "$node: a smoke pod is left"
  done
  unchanged smoke-again playbooks/nvidia_container_runtime.yml --limit "$DOCKER_NODE:$CTRD_NODE"
}

restore_scheduler() { on kgn-cp-kubeasz 'mv /root/kube-scheduler.fault /opt/kube/bin/kube-scheduler'; }

case_control_plane_fails() {
  say "one control plane's kube-scheduler cannot come back: its cluster's scheduler step stops, the rest goes on"
  local before
  before=$(readlink "$top/reports/latest" || true)
  # the binary exits at start (a broken upgrade, installed over the running one as installers do: a new file moved
  # into place), and our drop-in is gone, so the run must restart the scheduler
  on kgn-cp-kubeasz 'cp -p /opt/kube/bin/kube-scheduler /root/kube-scheduler.fault &&
    printf "#!/bin/sh\necho \"kube-scheduler: fault injected: cannot start\" >&2\nexit 1\n" > /opt/kube/bin/.kube-scheduler.new &&
    chmod 0755 /opt/kube/bin/.kube-scheduler.new && mv /opt/kube/bin/.kube-scheduler.new /opt/kube/bin/kube-scheduler &&
    rm -f /etc/systemd/system/kube-scheduler.service.d/90-kube-gpu-nodes-scheduler-config.conf'
  run cp-fails site.yml -e kube_scheduler_extender_health_timeout=15
  grep -qE '^kgn-cp-kubeasz +: .*failed=1' "$logs/cp-fails.out" || { restore_scheduler; fail "the control plane did not fail"; }
  grep -qE '^localhost +: .*failed=1' "$logs/cp-fails.out" || { restore_scheduler; fail "the run did not end failed"; }
  for host in kgn-cp-kubeadm kgn-gpu-containerd kgn-gpu-docker; do
    grep -qE "^$host +: .*failed=0" "$logs/cp-fails.out" || { restore_scheduler; fail "$host failed too"; }
  done
  # the other cluster's stacks and every GPU node's labels still ran, and the report has every host's row
  # (the second grep reads all its input: a grep -q may quit first and fail the pipe under pipefail, SIGPIPE)
  grep -A3 'TASK \[kgn.gpu_nodes.gpu_sharing_stacks : Plan the stacks' "$logs/cp-fails.out" | grep 'kgn-cp-kubeadm' >/dev/null \
    || { restore_scheduler; fail "the kubeadm cluster's stacks did not run"; }
  [ "$(readlink "$top/reports/latest")" != "$before" ] || { restore_scheduler; fail "no report was written"; }
  python3 - "$top/reports/latest/report.json" <<'PY' || { restore_scheduler; fail "the report does not say it"; }
import json, sys
report = json.load(open(sys.argv[1]))
rows = {r["host"]: r for r in report["rows"]}
assert set(rows) == {"kgn-cp-kubeadm", "kgn-cp-kubeasz", "kgn-gpu-docker", "kgn-gpu-containerd"}, set(rows)
failed = rows["kgn-cp-kubeasz"]
reached = next(c for c in failed["checks"] if c["id"] == "host_reached")
assert failed["verdict"] == "failed" and reached["status"] == "failed", failed
assert "kube-scheduler" in reached["summary"] and reached["diagnosis"][0]["id"] == "host_failed", reached
# what it gathered before it stopped: the scheduler's recorded state, not "?"
assert failed["scheduler"].startswith("v1beta"), failed["scheduler"]
for host in ("kgn-cp-kubeadm", "kgn-gpu-docker", "kgn-gpu-containerd"):
    assert rows[host]["verdict"] in ("ok", "degraded"), (host, rows[host]["verdict"])
    assert not [c for c in rows[host]["checks"] if c["id"] == "host_reached"], host
labels = {c["id"]: c for c in rows["kgn-gpu-docker"]["checks"]}["node_labels"]
assert labels["status"] == "ok", labels
PY
  cp "$top/reports/latest/report.md" "$logs/cp-fails-report.md"
  restore_scheduler
  ok_run cp-fails-repair playbooks/kube_scheduler_extender.yml --limit kgn-cp-kubeasz
  on kgn-cp-kubeasz 'pid=$(systemctl show -p MainPID --value kube-scheduler); test "$pid" -gt 0 &&
    tr "\0" " " < /proc/$pid/cmdline | grep -q -- "--config="' || fail "kube-scheduler is not back on its config"
  unchanged cp-fails-again site.yml
}

CDI_SPEC=/var/run/cdi/nvidia.json
cri() {  # cri NODE EXPR: evaluate EXPR on `crictl info` (the running containerd's CRI answer) as `c`
  on "$1" "crictl info" | python3 -c "import json, sys; c = json.load(sys.stdin)['config']; $2"
}

case_cdi_spec_deleted() {
  say "the node's CDI spec is deleted (containerd 2.1, CDI mode)"
  on $CTRD_NODE "rm -f $CDI_SPEC"
  ok_run cdi-deleted playbooks/nvidia_container_runtime.yml --limit $CTRD_NODE
  said cdi-deleted "repaired: CDI spec $CDI_SPEC was missing: generated"
  on $CTRD_NODE "test -s $CDI_SPEC && nvidia-ctk cdi list 2>/dev/null | grep -qx 'nvidia.com/gpu=all'" || fail "the spec is not back"
  cri $CTRD_NODE "assert c['enableCDI'] is True and c['containerd']['defaultRuntimeName'] == 'nvidia', c" \
    || fail "containerd does not run nvidia by default with CDI on"
  unchanged cdi-deleted-again playbooks/nvidia_container_runtime.yml --limit $CTRD_NODE
}

case_cdi_spec_stale() {
  say "the CDI spec is left stale by a driver change (it names another driver); the planned upgrade regenerates it"
  # The lab's trixie has one driver version (550.163.01), so the spec is made to name another driver by hand:
  # what a spec written before a driver upgrade looks like (NVIDIA/nvidia-container-toolkit#1895).
  on $CTRD_NODE "sed -i 's/580\.159\.04/570.86.15/g' $CDI_SPEC && touch -d '2 days ago' $CDI_SPEC"
  ok_run cdi-stale playbooks/nvidia_driver_upgrade.yml --limit $CTRD_NODE -e gpu_driver_version=550.163.01
  said cdi-stale "regenerated (stale: written for driver 570.86.15"
  on $CTRD_NODE "! grep -q 570.86.15 $CDI_SPEC" || fail "the spec still names the old driver"
  unchanged cdi-stale-again playbooks/nvidia_container_runtime.yml --limit $CTRD_NODE
}

case_containerd2_config_reset() {
  say "containerd 2's config.toml is reset to \`containerd config default\` (our drop-in no longer imported)"
  on $CTRD_NODE 'containerd config default > /etc/containerd/config.toml && systemctl restart containerd'
  cri $CTRD_NODE "assert c['containerd']['defaultRuntimeName'] == 'runc', c" || fail "the fault did not take"
  ok_run ctrd-reset playbooks/nvidia_container_runtime.yml --limit $CTRD_NODE
  said ctrd-reset "no longer imported the nvidia drop-in"
  on $CTRD_NODE 'grep -q "^version = 3" /etc/containerd/config.toml && grep -q 99-nvidia.toml /etc/containerd/config.toml' \
    || fail "config.toml is not the 2.x layout importing our drop-in"
  cri $CTRD_NODE "assert c['containerd']['defaultRuntimeName'] == 'nvidia' and c['enableCDI'] is True, c" \
    || fail "containerd does not run nvidia by default with CDI on"
  unchanged ctrd-reset-again playbooks/nvidia_container_runtime.yml --limit $CTRD_NODE
  # The reset also took the lab's own setting (restrict_oom_score_adj, which its real kubelet's pods need here,
  # docs/lab.md): a user's setting the project keeps but does not own, so it stays lost. Put back the way the
  # user's own configuration management would, and the project's next run must leave it alone.
  on $CTRD_NODE 'sed -i "s/^restrict_oom_score_adj = false$/restrict_oom_score_adj = true/" /etc/containerd/config.toml &&
    grep -q "^restrict_oom_score_adj = true$" /etc/containerd/config.toml && systemctl restart containerd' \
    || fail "could not put the lab's restrict_oom_score_adj back"
  unchanged ctrd-reset-kept playbooks/nvidia_container_runtime.yml --limit $CTRD_NODE
  on $CTRD_NODE 'containerd config dump | grep -q "restrict_oom_score_adj = true"' || fail "the user's setting was undone"
}

case_toolkit_dpkg_interrupted() {
  say "apt-get install --reinstall of the toolkit packages is killed mid-way (dpkg interrupted, holds dropped)"
  # libnvidia-container1's stand-in postinst waits while /run/kgn-standin-slow-postinst exists: apt-get and dpkg
  # are killed there, as a reboot or an OOM kill would.
  on $CTRD_NODE 'touch /run/kgn-standin-slow-postinst; rm -f /run/kgn-standin-postinst-waiting
    (DEBIAN_FRONTEND=noninteractive apt-get install -y -q --reinstall --allow-change-held-packages libnvidia-container1 \
      libnvidia-container-tools nvidia-container-toolkit-base nvidia-container-toolkit >/root/reinstall.log 2>&1 &)
    for i in $(seq 120); do [ -e /run/kgn-standin-postinst-waiting ] && break; sleep 1; done
    pkill -9 -x apt-get; pkill -9 -x dpkg; pkill -9 -f 'libnvidia-container1[.]postinst'
    rm -f /run/kgn-standin-slow-postinst /run/kgn-standin-postinst-waiting; sleep 1'
  on $CTRD_NODE 'dpkg --audit | grep -q libnvidia-container1 && ! apt-get check -q >/dev/null 2>&1' \
    || fail "the fault did not leave dpkg interrupted"
  ok_run dpkg-interrupted site.yml --limit "lab_kubeadm:localhost"
  said dpkg-interrupted "repaired: dpkg was interrupted"
  said dpkg-interrupted "re-applied (after the repair above)"
  grep -q "Nothing was changed" "$logs/dpkg-interrupted.out" && fail "the run says nothing was changed"
  on $CTRD_NODE 'test -z "$(dpkg --audit)" && apt-get check -q >/dev/null' || fail "the packages are not consistent"
  on $CTRD_NODE 'for p in nvidia-container-toolkit nvidia-container-toolkit-base; do apt-mark showhold | grep -qx $p || exit 1; done' \
    || fail "the toolkit packages are not held"
  unchanged dpkg-interrupted-again site.yml --limit "lab_kubeadm:localhost"
}

case_toolkit_config_deleted() {
  say "/etc/nvidia-container-runtime/config.toml is deleted"
  on $CTRD_NODE 'rm -f /etc/nvidia-container-runtime/config.toml'
  ok_run config-deleted playbooks/nvidia_container_runtime.yml --limit $CTRD_NODE
  said config-deleted "repaired: /etc/nvidia-container-runtime/config.toml was missing"
  on $CTRD_NODE 'grep -qx "mode = \"cdi\"" /etc/nvidia-container-runtime/config.toml' || fail "config.toml is not back in CDI mode"
  unchanged config-deleted-again playbooks/nvidia_container_runtime.yml --limit $CTRD_NODE
}

kernel_installed() {  # Debian's next kernel on the trixie GPU node: its image, not its headers; prints its version
  on $CTRD_NODE 'DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends linux-image-amd64 >/dev/null'
  on $CTRD_NODE 'ls /boot | sed -n "s/^vmlinuz-//p" | sort -V | tail -n 1'
}

kernel_caught() {  # with the headers switched off the run cannot build: it says which kernel lacks the module and how
  local kernel=$1
  ok_run kernel-reported playbooks/nvidia_driver.yml --limit $CTRD_NODE -e nvidia_driver_kernel_headers=false
  said kernel-reported "kernel $kernel has no NVIDIA module: booting it leaves the GPUs without a driver"
  said kernel-reported "Run: apt-get install linux-headers-$kernel && dkms autoinstall -k $kernel"
  on $CTRD_NODE "! ls /lib/modules/$kernel/updates/dkms/ 2>/dev/null | grep -q nvidia" || fail "a module was built"
}

kernel_removed() {  # back to a node without a kernel of its own, as the lab's other steps expect
  local kernel=$1
  on $CTRD_NODE "DEBIAN_FRONTEND=noninteractive apt-get purge -y -q linux-image-amd64 linux-image-$kernel \
    linux-headers-$kernel >/dev/null"
  unchanged kernel-removed playbooks/nvidia_driver.yml --limit $CTRD_NODE
  if grep -q "has no NVIDIA module" "$logs/kernel-removed.out"; then fail "a removed kernel is still reported"; fi
}

case_kernel_update() {
  say "a kernel update: Debian's next kernel is installed (its image, not its headers); the run must name it"
  local kernel
  kernel=$(kernel_installed)
  [ -n "$kernel" ] || fail "no kernel image was installed"
  say "installed kernel $kernel"
  kernel_caught "$kernel"
  kernel_removed "$kernel"
}

# Not in the default list (the DKMS build of the driver's module takes minutes): scripts/lab/faults.sh kernel_update_build
case_kernel_update_build() {
  say "a kernel update, then the build: the kernel is named, then its headers installed and the module built by DKMS"
  local kernel
  kernel=$(kernel_installed)
  [ -n "$kernel" ] || fail "no kernel image was installed"
  say "installed kernel $kernel"
  kernel_caught "$kernel"
  # passing: the default run installs the kernel's headers, DKMS builds the module, the run checks it is there
  ok_run kernel-built playbooks/nvidia_driver.yml --limit $CTRD_NODE --diff
  said kernel-built "installed linux-headers-$kernel"
  on $CTRD_NODE "ls /lib/modules/$kernel/updates/dkms/nvidia-current.ko*" || fail "no module for $kernel after the run"
  on $CTRD_NODE "dkms status | grep -q 'nvidia-current/.*, $kernel, .*: installed'" || fail "DKMS has not installed it"
  unchanged kernel-again playbooks/nvidia_driver.yml --limit $CTRD_NODE
  if grep -q "has no NVIDIA module" "$logs/kernel-again.out"; then fail "the second run still reports the kernel"; fi
  kernel_removed "$kernel"
}

standin_strategy() {  # the stand-in device plugin answers with the strategy the project gave the real one (docs/lab.md)
  local unit=/etc/systemd/system/kgn-nvidia-device-plugin-standin.service wanted
  wanted=$(on kgn-cp-kubeadm "kubectl --kubeconfig /etc/kubernetes/admin.conf -n kube-system get daemonset \
    nvidia-device-plugin-daemonset -o jsonpath='{.spec.template.spec.containers[0].env[?(@.name==\"DEVICE_LIST_STRATEGY\")].value}'")
  wanted=${wanted:-envvar}  # NVIDIA's default when the DaemonSet names none
  if [ "$1" = agrees ]; then
    on $CTRD_NODE "grep -q -- '--device-list-strategy $wanted\$' $unit" \
      || fail "the lab's stand-in device plugin does not answer as the project's DaemonSet says ($wanted)"
  fi
  on $CTRD_NODE "sed -i 's/--device-list-strategy [a-z-]*\$/--device-list-strategy $wanted/' $unit &&
    systemctl daemon-reload && systemctl restart kgn-nvidia-device-plugin-standin.service"
  on kgn-cp-kubeadm "for i in \$(seq 60); do [ \"\$(kubectl --kubeconfig /etc/kubernetes/admin.conf get node $CTRD_NODE \
    -o jsonpath='{.status.allocatable.nvidia\.com/gpu}')\" = 1 ] && exit 0; sleep 1; done; exit 1" \
    || fail "the stand-in device plugin did not register again"
}

unasked_pod() {  # unasked_pod: what a pod that asks for no GPU but sets NVIDIA_VISIBLE_DEVICES=all got (its log)
  local kubectl='kubectl --kubeconfig /etc/kubernetes/admin.conf -n default'
  docker exec -i kgn-cp-kubeadm $kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: kgn-lab-unasked}
spec:
  nodeSelector: {kubernetes.io/hostname: $CTRD_NODE}
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - {name: tenant, image: kgn-lab/gpu-smoke:local, imagePullPolicy: Never,
     env: [{name: NVIDIA_VISIBLE_DEVICES, value: all}, {name: NVIDIA_DRIVER_CAPABILITIES, value: utility}],
     command: [sh, -c, "nvidia-smi -L; echo rc=\$?"]}
YAML
  on kgn-cp-kubeadm "for i in \$(seq 90); do case \$($kubectl get pod kgn-lab-unasked -o jsonpath='{.status.phase}') in
    Succeeded|Failed) exit 0;; esac; sleep 1; done; exit 1" || fail "the pod that asks for no GPU did not run"
  on kgn-cp-kubeadm "$kubectl logs kgn-lab-unasked; $kubectl delete pod kgn-lab-unasked --wait=true >/dev/null"
}

isolation_rows() {  # isolation_rows HOST:CELL...: the report's isolation column, and the GPU pod smoke got its GPU
  python3 - "$top/reports/latest/report.json" "$@" <<'PY'
import json, sys
rows = {r["host"]: r for r in json.load(open(sys.argv[1]))["rows"]}
for wanted in sys.argv[2:]:
    host, cell = wanted.split(":", 1)
    checks = {c["id"]: c for c in rows[host]["checks"]}
    print(f"{host}: isolation {rows[host]['isolation']!r}: {checks['gpu_isolation']['summary']}")
    assert rows[host]["isolation"] == cell, (host, rows[host]["isolation"], checks["gpu_isolation"])
    if host == "kgn-gpu-containerd":  # the GPU pod of the stack still gets what the runtime injects (nvidia-smi)
        pod = checks["pod_smoke"]["evidence"]["pods"][0]
        assert "kgn-smoke: rc 127" not in pod["log"] and "kgn-smoke: rc" in pod["log"], pod
PY
}

case_gpu_isolation() {
  say "a container and a pod that ask for no GPU but set NVIDIA_VISIBLE_DEVICES=all: open before, closed after"
  local hosts="lab_kubeadm:localhost"
  # the converged lab: its stand-in device plugin answers as the project's DaemonSet says
  standin_strategy agrees
  # before: the old behaviour, chosen by name
  ok_run iso-open site.yml --limit "$hosts" -e kgn_gpu_envvar_unprivileged=accept
  on $CTRD_NODE "grep -qx 'accept-nvidia-visible-devices-envvar-when-unprivileged = true' \
    /etc/nvidia-container-runtime/config.toml" || fail "before: the toolkit's config does not accept the variable"
  standin_strategy follows
  ok_run iso-open-verify playbooks/verify.yml --limit "$hosts" -e kgn_gpu_envvar_unprivileged=accept
  isolation_rows "$CTRD_NODE:open (accepted)" || fail "before: the report does not say open"
  # into a file first: a grep -q on the pipe may close it before the pod's stderr is written (SIGPIPE, pipefail)
  unasked_pod >"$logs/iso-open-pod.out"; cat "$logs/iso-open-pod.out"
  grep -q "rc=[^1]" "$logs/iso-open-pod.out" || fail "before: the pod that asked for nothing got no nvidia-smi"
  # after: the default
  ok_run iso-closed site.yml --limit "$hosts"
  says iso-closed "$CTRD_NODE: container_runtime: /etc/nvidia-container-runtime/config.toml: nvidia-container-runtime.mode \
set to cdi; NVIDIA_VISIBLE_DEVICES from unprivileged containers refused (no restart"
  on $CTRD_NODE "grep -qx 'accept-nvidia-visible-devices-envvar-when-unprivileged = false' \
    /etc/nvidia-container-runtime/config.toml" || fail "after: the toolkit's config does not refuse the variable"
  standin_strategy follows
  ok_run iso-closed-verify playbooks/verify.yml --limit "$hosts"
  isolation_rows "$CTRD_NODE:closed" || fail "after: the report does not say closed, or the GPU pod lost its GPU"
  unasked_pod >"$logs/iso-closed-pod.out"; cat "$logs/iso-closed-pod.out"
  grep -q "rc=127" "$logs/iso-closed-pod.out" || fail "after: the pod that asked for nothing got nvidia-smi"
  on $CTRD_NODE "grep -q 'Ignoring devices requested by environment variable' /var/log/nvidia-container-runtime-standin.log" \
    || fail "the runtime did not log the refusal"
  unchanged iso-again site.yml --limit "$hosts"
  # the Docker node (legacy mode): gpushare hands GPUs out by the variable only, so the door stays open there, said;
  # with a stack that allows it, closed there too, and the engine smoke still gets its GPUs (by the volume mount)
  ok_run iso-docker-verify playbooks/verify.yml --limit "$DOCKER_NODE:localhost"
  isolation_rows "$DOCKER_NODE:open (a stack needs it)" || fail "the gpushare node's row does not say why it is open"
  ok_run iso-docker-closed playbooks/nvidia_container_runtime.yml --limit "$DOCKER_NODE" -e '{"gpu_sharing_stacks": []}'
  ok_run iso-docker-closed-verify playbooks/verify.yml --limit "$DOCKER_NODE:localhost" -e '{"gpu_sharing_stacks": []}'
  isolation_rows "$DOCKER_NODE:closed" || fail "the Docker node without gpushare is not closed"
  row_says $DOCKER_NODE 'assert checks["engine_smoke"]["status"] != "failed", checks["engine_smoke"]' \
    || fail "the engine smoke lost its GPUs on the closed Docker node"
  ok_run iso-docker-back playbooks/nvidia_container_runtime.yml --limit "$DOCKER_NODE"
  unchanged iso-docker-again playbooks/nvidia_container_runtime.yml --limit "$DOCKER_NODE"
}

cases=(runtime_binary_gone runtime_injects_nothing containerd_stopped report_names_the_cause disk_full package_removed concurrent_runs
       scheduler_restart_interrupted config_unreadable control_plane_fails stack_removed foreign_device_plugin
       cdi_spec_deleted cdi_spec_stale containerd2_config_reset toolkit_dpkg_interrupted toolkit_config_deleted
       kernel_update drain_blocked_by_budget node_hangs api_server_down
       containerd_later_import daemon_json_symlinked gpu_isolation)
case "${1:-list}" in
  list) printf '%s\n' "${cases[@]}" ;;
  *) "case_$1" ;;
esac
