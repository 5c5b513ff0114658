#!/usr/bin/env bash
# The local lab: systemd containers as Kubernetes nodes (see docs/architecture.md, "The lab").
#   lab.sh up        start the node containers (kept when already running) and lay them out
#   lab.sh converge  run site.yml against the lab and print what it did
#   lab.sh down      remove the node containers and their volumes (package caches are kept)
#   lab.sh status    list the nodes and what runs on them
#   lab.sh node NAME SUITE [engine:/var/lib/ENGINE]   start one extra node (used by bench/)
#   lab.sh prepare [ansible-playbook args]            lay out the nodes of an inventory
# Sourced (scripts/lab/examples.sh), it only defines the functions: start_node, wait_booted, ...
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$top"
cache=${KGN_LAB_CACHE:-/var/cache/kgn-lab}
# The label that `lab.sh down` removes by; a script that sources this file sets its own first.
label=${KGN_LAB_LABEL:-kube-gpu-nodes.lab=1}

# name image extra-docker-args...
nodes=(
  "kgn-cp-kubeadm trixie engine:/var/lib/containerd"
  "kgn-cp-kubeasz bullseye"
  "kgn-gpu-docker bookworm engine:/var/lib/docker"
  "kgn-gpu-containerd trixie engine:/var/lib/containerd"
)

start_node() {  # start_node NAME SUITE [engine:/var/lib/ENGINE] [HOSTNAME (default NAME)]
  local name=$1 suite=$2 extra=${3:-} hostname=${4:-$1} args=()
  if [ "$(docker inspect -f '{{.State.Running}}' "$name" 2>/dev/null)" = true ]; then
    echo "lab: $name running"
    return 0
  fi
  docker rm -f "$name" >/dev/null 2>&1 || true
  # One apt archive cache per Debian suite: apt never waits for the archive lock, so nodes that
  # install at the same time must not share one; same-suite nodes rarely do, and only they can
  # reuse each other's packages.
  # KGN_LAB_ARCHIVE names a node's own archive instead (bench/: many same-suite nodes at once).
  local archive=${KGN_LAB_ARCHIVE:-$cache/apt/$suite}
  mkdir -p "$archive/partial"
  args=(--detach --name "$name" --hostname "$hostname" --label "$label"
        --cap-add SYS_ADMIN --cgroupns=host --tmpfs /run --tmpfs /tmp
        -v /sys/fs/cgroup:/sys/fs/cgroup:rw
        -v "$archive:/var/cache/apt/archives"
        -v "$cache/nvidia-repo:/srv/kgn-nvidia-repo:ro"
        -v "$cache/kube:/srv/kgn-kube:ro")
  if [ "${extra%%:*}" = engine ]; then
    # A container engine inside the node needs these; its state lives in a volume because overlayfs cannot hold
    # another overlayfs. A real kubelet also needs no AppArmor profile of the host on the node, and runc 1.3 opens a
    # container's mount namespace through /proc, which needs SYS_PTRACE (docs/lab.md, "A real kubelet in a
    # container"). /proc/sys stays read-only: the machine's kernel settings are never the lab's to change.
    args+=(--cap-add NET_ADMIN --cap-add SYS_PTRACE --security-opt seccomp=unconfined --security-opt apparmor=unconfined
           -v "$name-engine:${extra#engine:}")
  fi
  docker run "${args[@]}" "local/debian:$suite" >/dev/null
  echo "lab: started $name (local/debian:$suite)"
}

wait_booted() {
  local name=$1 state
  for _ in $(seq 1 60); do
    state=$(docker exec "$name" systemctl is-system-running 2>/dev/null || true)
    case "$state" in running|degraded) return 0 ;; esac
    sleep 1
  done
  echo "lab: $name did not finish booting (systemd says '$state')" >&2
  return 1
}

up() {
  mkdir -p "$cache/nvidia-repo"
  bash scripts/lab/kube-binaries.sh
  bash lab/standins/nvidia-repo/build.sh "$cache/nvidia-repo"
  for n in "${nodes[@]}"; do
    # shellcheck disable=SC2086
    start_node $n
  done
  for n in "${nodes[@]}"; do wait_booted "${n%% *}"; done
  ansible-playbook lab/playbooks/prepare.yml
}

node() {  # node NAME SUITE [engine:/var/lib/ENGINE]
  mkdir -p "$cache/nvidia-repo" "$cache/kube"
  # Every systemd node takes several inotify instances; at the default 128 per user the 20-odd-th
  # node container exits at boot without a word (bench/ starts 32 of them).
  if [ "$(sysctl -n fs.inotify.max_user_instances)" -lt 1024 ]; then
    sysctl -q -w fs.inotify.max_user_instances=1024
  fi
  start_node "$@"
  wait_booted "$1"
}

converge() {
  local log start end
  mkdir -p reports
  log=reports/lab-converge-$(date +%Y%m%d-%H%M%S).log
  start=$(date +%s)
  ansible-playbook site.yml "$@" | tee "$log"
  end=$(date +%s)
  echo "lab: site.yml finished in $((end - start)) s (log: $log)"
}

down() {
  local ids
  ids=$(docker ps -aq --filter "label=$label")
  [ -z "$ids" ] || docker rm -f $ids >/dev/null
  for n in "${nodes[@]}"; do docker volume rm -f "${n%% *}-engine" >/dev/null 2>&1 || true; done
  # a real kubelet puts its pods' cgroups under a root of its own in the host's tree (kgn-lab-<node>, docs/lab.md):
  # empty once the node is gone, removed deepest first
  find /sys/fs/cgroup/*/ -maxdepth 1 -name 'kgn-lab-*' -type d -print0 2>/dev/null |
    xargs -0 -r -I{} find {} -depth -type d -exec rmdir {} + 2>/dev/null || true
  echo "lab: removed the node containers (caches kept in $cache)"
}

status() {
  docker ps -a --filter "label=$label" --format 'table {{.Names}}\t{{.Image}}\t{{.Status}}'
  for n in "${nodes[@]}"; do
    name=${n%% *}
    docker inspect "$name" >/dev/null 2>&1 || continue
    printf '%s: systemd %s; kube-scheduler %s; docker %s; containerd %s\n' "$name" \
      "$(docker exec "$name" systemctl is-system-running 2>/dev/null || true)" \
      "$(docker exec "$name" pgrep -f 'bin/kube-scheduler ' >/dev/null 2>&1 && echo running || echo -)" \
      "$(docker exec "$name" systemctl is-active docker 2>/dev/null || true)" \
      "$(docker exec "$name" systemctl is-active containerd 2>/dev/null || true)"
  done
}

main() {
  local cmd=${1:-status}
  shift || true
  case "$cmd" in
    up) up ;;
    node) node "$@" ;;
    prepare) ansible-playbook lab/playbooks/prepare.yml "$@" ;;
    converge) converge "$@" ;;
    down) down ;;
    status) status ;;
    *) echo "usage: $0 up|converge|down|status|node|prepare" >&2; exit 2 ;;
  esac
}

# Run only when executed, not when sourced
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  main "$@"
fi
