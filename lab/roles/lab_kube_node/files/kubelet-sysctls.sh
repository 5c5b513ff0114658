#!/bin/sh
# Lab fixture (kubelet.service's ExecStartPre): the kernel settings the kubelet wants (its container manager's
# setupKernelTunables, with protectKernelDefaults false: it sets any that differ, and stops if it cannot) are
# global, not per container: a kubelet in a node container would set them on the machine that runs the lab.
# So where the machine's value differs, the node gets a file with the wanted value bind-mounted over the entry
# (its /proc/sys stays read-only): the kubelet reads what it wants and writes nothing.
set -eu
dir=/run/kgn-lab/sysctl
mkdir -p "$dir"
for entry in vm/overcommit_memory=1 vm/panic_on_oom=0 kernel/panic=10 kernel/panic_on_oops=1 \
             kernel/keys/root_maxkeys=1000000 kernel/keys/root_maxbytes=25000000; do
  key=${entry%%=*} want=${entry#*=}
  file=/proc/sys/$key
  [ "$(cat "$file")" = "$want" ] && continue
  fake=$dir/$(echo "$key" | tr / .)
  echo "$want" >"$fake"
  mount --bind "$fake" "$file"
done
