#!/usr/bin/env bash
# The one test command (`make test`, called by .ci/run). It sets up what it needs (venv,
# collections, Docker daemon, node images, the stand-in NVIDIA repository) and runs every check.
# Each step counts as one test; the last line is "N passed, N failed".
#   scripts/test.sh [all|lint|unit|compat|molecule|lab|examples] [molecule scenario...]
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
what=${1:-all}
shift || true
logs=$top/.cache/test-logs
mkdir -p "$logs"
passed=0 failed=0 failures=()
export PY_COLORS=0 ANSIBLE_FORCE_COLOR=0 ANSIBLE_NOCOLOR=1

step() {  # step NAME COMMAND...: run, log, count
  local name=$1 log start rc
  shift
  log=$logs/$(echo "$name" | tr -c 'A-Za-z0-9_.-' '_').log
  start=$(date +%s)
  printf '%-58s ' "$name"
  "$@" >"$log" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then
    passed=$((passed + 1)); echo "PASS ($(( $(date +%s) - start )) s)"
  else
    failed=$((failed + 1)); failures+=("$name"); echo "FAIL ($(( $(date +%s) - start )) s, exit $rc, log $log)"
    # CI keeps only the console: show the failing lines themselves, then how the log ends
    grep -E '^E  |^FAILED [^-]|fatal: \[|^ERROR' "$log" | head -n 30 | sed 's/^/    ! /'
    tail -n 25 "$log" | sed 's/^/    | /'
  fi
  return $rc
}

finish() {
  echo
  [ ${#failures[@]} -eq 0 ] || printf 'failed: %s\n' "${failures[@]}"
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
  exit
}

# --- set-up (counted: a broken set-up is a failed test run) ---------------------------------
step "setup: python venv and collections" bash scripts/setup.sh || finish
# shellcheck disable=SC1091
source .venv/bin/activate

pytest_run() {  # pytest exits 5 when it collects nothing, which is a failure here too
  # one worker per core (pytest-xdist); a file's tests stay on one worker, so its module fixtures run once
  pytest -q -p no:cacheprovider -n auto --dist loadfile "$@"
}

lint() {
  step "lint: yamllint" yamllint --strict .
  # ANSIBLE_HOME of its own, as compat's: a copy of this collection in ~/.ansible/collections (left there by an
  # ansible-lint without --offline, from any checkout on the machine) would shadow this checkout's plugins
  step "lint: ansible-lint (production profile)" env "ANSIBLE_HOME=$top/.cache/ansible-home" ansible-lint --offline -q
  step "lint: ruff" bash -c 'ruff check . && ruff check lab/standins/kube-scheduler lab/standins/kubelet-static-pods lab/standins/crio \
    lab/standins/crictl/crictl lab/standins/nvidia-repo/files/nvidia-ctk lab/standins/nvidia-repo/files/nvidia-container-runtime \
    lab/files/lab-image.py'
  step "lint: ansible-doc lists every kgn.gpu_nodes filter documented" bash -c \
    "ansible-doc -t filter -l kgn.gpu_nodes 2>&1 | grep -E '^kgn\.gpu_nodes\.' > $logs/filters.txt; cat $logs/filters.txt; \
     test -s $logs/filters.txt && ! grep -q UNDOCUMENTED $logs/filters.txt"
  step "lint: site.yml syntax (lab and example inventories)" bash -c \
    'for i in inventories/lab/hosts.yml inventories/example/hosts.yml inventories/examples/*/hosts.yml; do
       ansible-playbook --syntax-check -i "$i" site.yml || exit 1; done'
}

unit() {
  step "unit: pytest tests/unit tests/render" pytest_run tests/unit tests/render
  step "collection: build, install, use its role by FQCN from outside the repository" bash tests/collection/run.sh
  for playbook in tests/integration/*.yml; do
    [ -e "$playbook" ] || continue
    step "integration: $(basename "$playbook")" ansible-playbook -i localhost, -c local "$playbook"
  done
}

# ansible-core 2.16, the control machine for EL 7 fleets (their Python 3.6 is too old for 2.17+): its own venv and
# collections (scripts/setup.sh --core 2.16), the same checks but molecule and the lab, which stay on 2.19.
compat() {
  local venv=$top/.venv-2.16
  step "compat 2.16: setup (.venv-2.16, its collections)" bash scripts/setup.sh --core 2.16 || return
  # ANSIBLE_HOME of its own: ansible-lint --offline puts ~/.ansible/collections first, where a copy of this
  # collection that an ansible-lint without --offline installed would shadow the checkout
  local env216=(env "PATH=$venv/bin:$PATH" "VIRTUAL_ENV=$venv" "ANSIBLE_COLLECTIONS_PATH=$venv/collections"
                "ANSIBLE_HOME=$top/.cache/ansible-2.16")
  step "compat 2.16: lint: syntax of site.yml and playbooks/, ansible-doc" "${env216[@]}" bash -c \
    'set -e
     for i in inventories/lab/hosts.yml inventories/example/hosts.yml inventories/examples/*/hosts.yml; do
       ansible-playbook --syntax-check -i "$i" site.yml playbooks/*.yml; done
     ansible --version | grep -q "core 2\.16\."
     modules=$(ansible-doc -t module -l kgn.gpu_nodes | awk "/^kgn\.gpu_nodes\./ {print \$1}")
     filters=$(ansible-doc -t filter -l kgn.gpu_nodes | awk "/^kgn\.gpu_nodes\./ {print \$1}")
     test "$(echo "$modules" | wc -w)" -eq "$(ls plugins/modules/*.py | wc -l)"
     if ansible-doc -t filter -l kgn.gpu_nodes | grep UNDOCUMENTED; then exit 1; fi
     # ansible-doc exits 0 when a plugin is missing or its documentation does not load: it only warns
     if { ansible-doc -t module $modules && ansible-doc -t filter $filters; } 2>&1 >/dev/null \
        | grep -E "^\[(WARNING|ERROR)\]"; then exit 1; fi'
  # molecule/ is left out: its scenarios run on 2.19 only
  step "compat 2.16: lint: ansible-lint (production profile)" "${env216[@]}" ansible-lint --offline -q --exclude molecule/
  step "compat 2.16: unit: pytest tests/unit" "${env216[@]}" pytest -q -p no:cacheprovider -n auto --dist loadfile \
    tests/unit
  # every render test but the lab's (Debian nodes, rendered on 2.19; the example inventories render here): the
  # four compat steps stay under four minutes
  step "compat 2.16: render: pytest tests/render" "${env216[@]}" pytest -q -p no:cacheprovider -n auto --dist loadfile \
    tests/render \
    --ignore=tests/render/test_render_playbook.py
}

images() {
  step "setup: docker daemon and node images" bash -c \
    'bash scripts/lab/ensure-docker.sh && bash scripts/lab/build-images.sh' || finish
  step "setup: stand-in NVIDIA apt repository" bash lab/standins/nvidia-repo/build.sh /var/cache/kgn-lab/nvidia-repo
  step "setup: Kubernetes binaries from the mirror folder, checked" bash scripts/lab/kube-binaries.sh
}

molecule_all() {
  local scenarios=("$@") s
  if [ ${#scenarios[@]} -eq 0 ]; then
    for s in molecule/*/molecule.yml; do scenarios+=("$(basename "$(dirname "$s")")"); done
  fi
  for s in "${scenarios[@]}"; do
    step "molecule: $s" molecule test -s "$s"
  done
}

lab() {
  local render=$top/.cache/lab-render
  step "lab: fresh nodes up and laid out" bash -c 'bash scripts/lab/lab.sh down && bash scripts/lab/lab.sh up' || return
  # facts of an earlier lab must not stand for what the fresh nodes show
  rm -rf .cache/facts
  step "lab: site.yml converges" bash -o pipefail -c 'ansible-playbook site.yml | tee .cache/test-logs/site-1.out'
  # Render from the inventory and what that run recorded: every file equals the host's, byte for byte.
  step "lab: render of each host equals the files site.yml wrote there" bash -o pipefail -c \
    "rm -rf $render && ansible-playbook playbooks/render.yml -e render_dir=$render | tee .cache/test-logs/render.out \
     && ansible-playbook lab/playbooks/render_equals_apply.yml -e render_dir=$render"
  step "lab: second site.yml run reports changed=0 on every host" bash -o pipefail -c \
    'ansible-playbook site.yml | tee .cache/test-logs/site-2.out && scripts/check-recap.py --unchanged .cache/test-logs/site-2.out'
  step "lab: site.yml --check --diff runs without errors" ansible-playbook site.yml --check --diff
  # A no-op run reads each node once and skips what is in place: drift must still be seen.
  step "lab: site.yml repairs files damaged on a GPU node (the in-place checks see drift)" bash -o pipefail -c \
    'set -e; ansible-playbook lab/playbooks/drift.yml -e lab_drift=make
     ansible-playbook site.yml | tee .cache/test-logs/site-drift.out
     grep -E "^kgn-gpu-containerd +: .*changed=[1-9]" .cache/test-logs/site-drift.out
     ansible-playbook lab/playbooks/drift.yml -e lab_drift=check'
  local fault
  for fault in $(bash scripts/lab/faults.sh list); do
    step "lab fault: $fault" bash scripts/lab/faults.sh "$fault"
  done
  # A planned driver upgrade on one node: bookworm's 535.261.03 (the lab's pin) to 535.309.01 (security):
  # cordon, drain, pin, release the holds, install, hold, uncordon.
  step "lab: nvidia_driver_upgrade.yml upgrades one node's driver, cordoned then uncordoned" bash -o pipefail -c \
    'set -e; ansible-playbook playbooks/nvidia_driver_upgrade.yml --limit kgn-gpu-docker -e gpu_driver_version=535.309.01 \
       | tee .cache/test-logs/upgrade.out
     # the second grep reads all its input (a grep -q may quit first and fail the pipe under pipefail)
     grep -A2 "TASK \[Cordon and drain the node" .cache/test-logs/upgrade.out | grep "changed: \[kgn-gpu-docker" >/dev/null
     grep -q "Need to get" .cache/test-logs/upgrade.out  # the role reports what the upgrade downloads
     ansible-playbook lab/playbooks/check_driver_upgrade.yml -e lab_upgrade_version=535.309.01'
  # The upgraded node no longer matches the lab's inventory (535.261.03): leave no lab that the next
  # `ansible-playbook site.yml` would refuse.
  step "lab: the lab is taken down (its nodes no longer match the inventory)" bash scripts/lab/lab.sh down
  examples
}

# Every example inventory end to end: nodes shaped like its hosts, `site.yml --check --diff` with its own
# variables (plus lab/examples/<name>.yml), nothing changed, the plans and report it expects; nodes removed.
examples() {
  local name
  for name in $(bash scripts/lab/examples.sh list); do
    step "lab example: $name (site.yml --check --diff)" bash scripts/lab/examples.sh "$name"
  done
}

# CI has 2 cores, and the molecule scenarios spend much of their time waiting on their containers (systemd, apt,
# daemons): the checks that need no container (lint, unit, compat) run beside them, and their lines are printed
# when both are done. The lab runs after both: its fault cases time what they wait for.
static_and_molecule() {
  local out=$logs/static.console counts=$logs/static.counts pid s_passed=0 s_failed=1 f
  local s_failures=("lint, unit and compat: ended without counts (log $out)")
  rm -f "$counts"
  ( passed=0 failed=0 failures=(); lint; unit; compat
    { echo "s_passed=$passed s_failed=$failed"
      for f in "${failures[@]}"; do printf 's_failures+=(%q)\n' "$f"; done; } > "$counts" ) > "$out" 2>&1 &
  pid=$!
  images
  molecule_all
  wait "$pid"
  echo "--- lint, unit and compat (ran beside the molecule scenarios) ---"
  cat "$out"
  if [ -s "$counts" ]; then
    s_failures=()
    # shellcheck disable=SC1090
    source "$counts"
  fi
  passed=$((passed + s_passed)) failed=$((failed + s_failed)) failures+=("${s_failures[@]}")
}

case "$what" in
  lint) lint ;;
  unit) unit ;;
  compat) compat ;;
  molecule) images; molecule_all "$@" ;;
  lab) images; lab ;;
  examples) images; examples ;;
  all) static_and_molecule; lab ;;
  *) echo "usage: $0 [all|lint|unit|compat|molecule|lab|examples] [scenario...]" >&2; exit 2 ;;
esac
finish
