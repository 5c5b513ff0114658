#!/usr/bin/env bash
# shellcheck disable=SC2154  # top and cache are set by lab.sh, sourced below
# Every example inventory end to end (docs/lab-examples.md): node containers shaped like the example's hosts,
# laid out by lab/playbooks/prepare.yml, then `site.yml --check --diff` with the example's own inventory plus
# lab/examples/<name>.yml (only what cannot be the same here, each with its reason). Checked: no host failed or
# unreachable, nothing changed on the nodes (files, packages, API objects), and the run's plans and report say
# what lab/examples/expect/<name>.yml expects (lab/playbooks/check_example.yml). The nodes are removed afterwards.
#   examples.sh list          the examples that have a lab overlay
#   examples.sh NAME|all      run one example, or all of them one after the other
#   examples.sh down [NAME]   remove the example nodes (all of them without NAME)
# KGN_EXAMPLES_KEEP=1 keeps the nodes of a run for a look (examples.sh down NAME removes them).
set -euo pipefail
# top (the checkout, where lab.sh cd's to), cache and the node functions come from lab.sh
# shellcheck source=scripts/lab/lab.sh
KGN_LAB_LABEL=kube-gpu-nodes.lab-example=- source "$(dirname "${BASH_SOURCE[0]}")/lab.sh"
work=$top/.cache/examples

examples() {
  local f
  for f in lab/examples/*.yml; do basename "$f" .yml; done
}

inventory_args() {  # the example's own inventory, then the lab's overlay
  printf '%s\n' -i "inventories/examples/$1" -i "lab/examples/$1.yml"
}

# One line per node: container suite engine hostname (from the layered inventory)
nodes_of() {
  local -a inv
  mapfile -t inv < <(inventory_args "$1")
  ansible-inventory "${inv[@]}" --list | python3 -c '
import json, sys
inv = json.load(sys.stdin)
hostvars = inv["_meta"]["hostvars"]
groups = {g: set(inv.get(g, {}).get("hosts", [])) for g in ("gpu_nodes", "kube_control_plane")}
for host in sorted(groups["gpu_nodes"] | groups["kube_control_plane"]):
    hv = hostvars.get(host, {})
    name, suite = hv.get("ansible_host", ""), hv.get("lab_node_suite", "")
    if not name.startswith("kgn-ex-") or suite not in ("bullseye", "bookworm", "trixie"):
        sys.exit(f"{sys.argv[1]}: host {host} needs ansible_host kgn-ex-<...> and lab_node_suite bullseye|bookworm|trixie "
                 f"in lab/examples/{sys.argv[1]}.yml (it has {name!r}, {suite!r})")
    engine = hv.get("lab_gpu_node_engine") or hv.get("container_runtime") if host in groups["gpu_nodes"] else ""
    extra = f"engine:/var/lib/{engine}" if engine in ("docker", "containerd") else "-"
    print(name, suite, extra, host)
' "$1"
}

# What check mode must not change on a node: files under /etc, /opt, /usr/local/bin and the stand-in API's
# objects (checksums), and the installed packages.
snapshot() {
  docker exec "$1" sh -c '
    find /etc /opt /usr/local/bin /var/lib/kube-apiserver-standin -xdev -type f ! -name ld.so.cache -print0 2>/dev/null \
      | sort -z | xargs -0 -r sha256sum
    dpkg-query -W -f "\${Package} \${Version} \${db:Status-Abbrev}\n"'
}

# A managed control plane (no kube_control_plane host): the stand-in kube-apiserver runs on the control machine,
# where the example's kubectl calls go (KUBECONFIG), playing the example's Kubernetes version.
api_up() {  # api_up NAME DIR VERSION NODE...
  local name=$1 dir=$2 version=$3 port node
  shift 3
  mkdir -p "$dir/state"
  echo "$version" >"$dir/version"
  : >"$dir/nodes.yml"
  for node in "$@"; do
    printf -- '- name: %s\n  labels: {kubernetes.io/hostname: %s, kubernetes.io/os: linux, kubernetes.io/arch: amd64}\n' \
      "$node" "$node" >>"$dir/nodes.yml"
    printf '  capacity: {cpu: "2", memory: 4Gi, pods: "110"}\n  allocatable: {cpu: "2", memory: 4Gi, pods: "110"}\n' \
      >>"$dir/nodes.yml"
  done
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  python3 lab/standins/kube-apiserver --state-dir="$dir/state" --init-pki >/dev/null
  setsid python3 lab/standins/kube-apiserver --bind-address=127.0.0.1 --secure-port="$port" --state-dir="$dir/state" \
    --version-file="$dir/version" --nodes-file="$dir/nodes.yml" >"$dir/apiserver.log" 2>&1 &
  echo $! >"$dir/apiserver.pid"
  cat >"$dir/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
  - cluster: {certificate-authority-data: $(base64 -w0 "$dir/state/pki/apiserver.crt"), server: "https://127.0.0.1:$port"}
    name: standin
contexts:
  - context: {cluster: standin, user: admin}
    name: admin@standin
current-context: admin@standin
users:
  - name: admin
    user: {token: lab-standin-admin}
EOF
  for _ in $(seq 1 30); do
    if kubectl --kubeconfig "$dir/kubeconfig" --request-timeout=2s get --raw /readyz >/dev/null 2>&1; then
      echo "examples: $name: stand-in kube-apiserver v$version on 127.0.0.1:$port (managed control plane)"
      return 0
    fi
    sleep 1
  done
  echo "examples: $name: the stand-in kube-apiserver did not answer (log: $dir/apiserver.log)" >&2
  return 1
}

api_down() {
  local pid
  [ -f "$1/apiserver.pid" ] || return 0
  pid=$(cat "$1/apiserver.pid")
  kill "$pid" 2>/dev/null || true
  rm -f "$1/apiserver.pid"
}

down_one() {  # by the example's label: only containers this script started
  local name=$1 container
  api_down "$work/$name"
  for container in $(docker ps -a --filter "label=kube-gpu-nodes.lab-example=$name" --format '{{.Names}}'); do
    docker rm -f "$container" >/dev/null
    docker volume rm -f "$container-engine" >/dev/null 2>&1 || true
  done
  echo "examples: $name: nodes removed"
}

run_one() {
  local name=$1 dir=$work/$1 start container suite extra host version rc=0
  local -a inv nodes=() cps
  if [ ! -f "lab/examples/$name.yml" ] || [ ! -d "inventories/examples/$name" ]; then
    echo "examples: no example '$name' with a lab overlay; choose one of: $(examples | tr '\n' ' ')" >&2
    return 2
  fi
  start=$(date +%s)
  mapfile -t inv < <(inventory_args "$name")
  down_one "$name" >/dev/null
  label=kube-gpu-nodes.lab-example=$name  # start_node labels the containers with it
  rm -rf "$dir" && mkdir -p "$dir/before" "$dir/after"
  # facts and reports of their own: cached facts of the example's host names must not reach other runs
  export ANSIBLE_CACHE_PLUGIN_CONNECTION=$dir/facts
  mkdir -p "$cache/nvidia-repo"
  bash lab/standins/nvidia-repo/build.sh "$cache/nvidia-repo" >/dev/null
  while read -r container suite extra host; do
    nodes+=("$container")
    start_node "$container" "$suite" "${extra#-}" "$host"
  done < <(nodes_of "$name")
  for container in "${nodes[@]}"; do wait_booted "$container"; done
  mapfile -t cps < <(ansible "${inv[@]}" kube_control_plane --list-hosts 2>/dev/null | sed -n 's/^ \{4\}//p')
  if [ ${#cps[@]} -eq 0 ]; then
    version=$(ansible-inventory "${inv[@]}" --list | python3 -c \
      'import json, sys; print(next(iter(json.load(sys.stdin)["_meta"]["hostvars"].values()))["kubernetes_version"])')
    # shellcheck disable=SC2046
    api_up "$name" "$dir" "$version" $(ansible "${inv[@]}" gpu_nodes --list-hosts | sed -n 's/^ \{4\}//p')
    export KUBECONFIG=$dir/kubeconfig
  fi
  ansible-playbook "${inv[@]}" lab/playbooks/prepare.yml >"$dir/prepare.log" 2>&1 || {
    echo "examples: $name: laying out the nodes failed (log: $dir/prepare.log)" >&2
    tail -n 30 "$dir/prepare.log" >&2
    return 1
  }
  echo "examples: $name: nodes laid out in $(( $(date +%s) - start )) s"
  for container in "${nodes[@]}"; do snapshot "$container" >"$dir/before/$container"; done
  [ ${#cps[@]} -gt 0 ] || cp "$dir/state/objects.json" "$dir/before/api-objects.json"

  ansible-playbook "${inv[@]}" site.yml --check --diff -e "gpu_node_verify_report_dir=$dir/reports" \
    >"$dir/check.log" 2>&1 || rc=$?
  sed -n '/PLAY RECAP/,$p' "$dir/check.log"
  if [ $rc -ne 0 ]; then
    echo "examples: $name: site.yml --check --diff exited $rc (log: $dir/check.log)" >&2
    grep -E 'fatal: |FAILED!|ERROR' "$dir/check.log" | head -n 20 >&2 || true
    return 1
  fi
  python3 scripts/check-recap.py --no-failures "$dir/check.log"

  for container in "${nodes[@]}"; do
    snapshot "$container" >"$dir/after/$container"
    if ! diff -u "$dir/before/$container" "$dir/after/$container" >"$dir/changed-$container.diff"; then
      echo "examples: $name: check mode changed $container:" >&2
      head -n 40 "$dir/changed-$container.diff" >&2
      return 1
    fi
  done
  if [ ${#cps[@]} -eq 0 ] && ! cmp -s "$dir/before/api-objects.json" "$dir/state/objects.json"; then
    echo "examples: $name: check mode changed objects in the stand-in kube-apiserver" >&2
    return 1
  fi
  echo "examples: $name: check mode changed nothing on ${nodes[*]}"
  ansible-playbook "${inv[@]}" lab/playbooks/check_example.yml -e "@lab/examples/expect/$name.yml" \
    -e "lab_example_report=$dir/reports/latest-check/report.json" >"$dir/expect.log" 2>&1 || {
    grep -E 'fatal: |"msg"|msg:' "$dir/expect.log" | head -n 20 >&2  || true
    echo "examples: $name: the run did not plan or report what lab/examples/expect/$name.yml expects (log: $dir/expect.log)" >&2
    return 1
  }
  echo "examples: $name: planned and reported what lab/examples/expect/$name.yml expects"
  echo "examples: $name: passed in $(( $(date +%s) - start )) s"
}

main_examples() {
  local cmd=${1:-list} name rc=0
  case "$cmd" in
    list) examples ;;
    down)
      if [ -n "${2:-}" ]; then down_one "$2"; else for name in $(examples); do down_one "$name"; done; fi ;;
    _run) run_one "$2" ;;  # in a process of its own, where set -e holds (it does not under `||`)
    all)
      for name in $(examples); do
        bash "${BASH_SOURCE[0]}" _run "$name" || rc=1
        [ -n "${KGN_EXAMPLES_KEEP:-}" ] || down_one "$name"
      done
      return $rc ;;
    *)
      # not grep -q: it would stop reading, and under pipefail the killed writer fails the test
      if ! examples | grep -x -- "$cmd" >/dev/null; then
        echo "examples: no example '$cmd' with a lab overlay; choose one of: $(examples | tr '\n' ' ')" >&2
        return 2
      fi
      bash "${BASH_SOURCE[0]}" _run "$cmd" || rc=$?
      [ -n "${KGN_EXAMPLES_KEEP:-}" ] || down_one "$cmd"
      return $rc ;;
  esac
}

main_examples "$@"
