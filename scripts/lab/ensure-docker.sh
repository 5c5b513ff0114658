#!/usr/bin/env bash
# Make sure docker.io and debootstrap are installed and a Docker daemon answers.
# On hosts without systemd as PID 1 (CI containers) dockerd is started in the background.
set -euo pipefail

need=()
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
command -v gpg >/dev/null 2>&1 || need+=(gnupg)
command -v dpkg-scanpackages >/dev/null 2>&1 || need+=(dpkg-dev)
command -v apt-ftparchive >/dev/null 2>&1 || need+=(apt-utils)
# apt-get fails at once on a lock another apt holds (a machine's first minutes often run unattended-upgrades
# or cloud-init), so wait for apt's own locks first, as the modules do (up to 10 minutes). apt takes them with
# fcntl, which `flock` does not see: ask with lockf.
wait_apt_locks() {
  python3 - <<'PY'
import fcntl, os, sys, time
locks = ["/var/lib/dpkg/lock-frontend", "/var/lib/dpkg/lock", "/var/lib/apt/lists/lock", "/var/cache/apt/archives/lock"]
deadline, said = time.time() + 600, False
for path in locks:
    if not os.path.exists(path):
        continue
    with open(path, "a") as handle:
        while True:
            try:
                fcntl.lockf(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.lockf(handle, fcntl.LOCK_UN)
                break
            except OSError:
                if time.time() > deadline:
                    sys.exit(f"lab: {path} is still held by another apt or dpkg after 10 minutes; let it finish")
                if not said:
                    print(f"lab: waiting for {path} (another apt or dpkg runs)", flush=True)
                    said = True
                time.sleep(2)
PY
}

if [ ${#need[@]} -gt 0 ]; then
  echo "lab: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  wait_apt_locks
  apt-get -o DPkg::Lock::Timeout=600 update -qq
  wait_apt_locks
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

if docker info >/dev/null 2>&1; then
  exit 0
fi
if [ "$(ps -o comm= -p 1)" = systemd ]; then
  systemctl start docker
else
  # A daemon killed with its session leaves its pid file behind; dockerd refuses to start on it.
  if [ -f /var/run/docker.pid ] && ! kill -0 "$(cat /var/run/docker.pid)" 2>/dev/null; then
    rm -f /var/run/docker.pid
  fi
  echo "lab: starting dockerd in the background (log: /var/log/dockerd.log)"
  setsid dockerd >/var/log/dockerd.log 2>&1 < /dev/null &
fi
for _ in $(seq 1 60); do
  docker info >/dev/null 2>&1 && exit 0
  sleep 1
done
echo "lab: the Docker daemon did not answer within 60 s; the end of /var/log/dockerd.log:" >&2
tail -n 20 /var/log/dockerd.log >&2 || true
exit 1
