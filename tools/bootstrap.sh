#!/usr/bin/env bash
# Prepare a fresh Debian 12 machine for dtn-migrate: system packages, the
# services the functional tests use, and a virtualenv with the project.
# Idempotent; sourced by tools/demo and tools/test.
set -euo pipefail

TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${DTN_VENV:-$TOP/.venv}
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

# Runtime and test packages (bindep.txt lists them with their purpose).
# chromium is the browser of the dashboard tests: Playwright drives
# Debian's build (``playwright install`` downloads, which CI cannot do).
APT_PACKAGES="python3 python3-venv python3-dev python3-pyverbs gcc openssl
iproute2 socat rabbitmq-server mariadb-server postgresql procps
util-linux zookeeper redis-server
libnfs13 nfs-ganesha nfs-ganesha-vfs rpcbind shellcheck
chromium fonts-liberation"
if [ "${DTN_BENCH:-0}" = 1 ]; then
  APT_PACKAGES="$APT_PACKAGES iperf3 rsync globus-gridftp-server-progs
globus-gass-copy-progs xrootd-server xrootd-client libnfs-utils"
fi

# shellcheck source=tools/apt.sh
source "$TOP/tools/apt.sh"
# shellcheck disable=SC2086
apt_ensure bootstrap $APT_PACKAGES

# listening PORT: something accepts connections on 127.0.0.1:PORT.
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# wait_listening PORT: up to 60 s for it.
wait_listening() {
  for _ in $(seq 60); do
    listening "$1" && return 0
    sleep 1
  done
  return 0
}

# RabbitMQ carries the agents' RPC (the demo falls back to no bus).
if ! listening 5672; then
  echo "bootstrap: starting rabbitmq-server"
  $SUDO rabbitmq-server -detached >/dev/null 2>&1 || true
  wait_listening 5672
fi

# MariaDB holds the engines' TaskFlow persistence in the functional tests
# (SQLite is the embedded default).  root over the socket or 127.0.0.1
# with an empty password, as the machine image has it.
if ! listening 3306; then
  echo "bootstrap: starting mariadb"
  $SUDO mkdir -p /run/mysqld
  $SUDO chown mysql:mysql /run/mysqld 2>/dev/null || true
  $SUDO start-stop-daemon --start --oknodo --background \
    --exec /usr/sbin/mariadbd -- --user=mysql >/dev/null 2>&1 || true
  wait_listening 3306
fi

# PostgreSQL holds them too, in the tests that say so.  Its role dtnm
# (password dtnm, CREATEDB) is made over the local socket as postgres, so
# that it works whatever pg_hba.conf asks of TCP clients.
if ! listening 5432; then
  echo "bootstrap: starting postgresql"
  for version in /etc/postgresql/*; do
    [ -d "$version" ] || continue
    $SUDO pg_ctlcluster --skip-systemctl-redirect "${version##*/}" main \
      start >/dev/null 2>&1 || true
  done
  wait_listening 5432
fi
$SUDO runuser -u postgres -- psql -qAtc "DO \$\$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'dtnm') THEN
    CREATE ROLE dtnm LOGIN CREATEDB PASSWORD 'dtnm';
  END IF; END \$\$;" >/dev/null 2>&1 \
  || echo "bootstrap: could not make the PostgreSQL role dtnm" >&2

# The virtualenv uses the distribution's Python so that Debian's pyverbs
# (RDMA) is importable; everything else comes from PyPI.
if [ ! -x "$VENV/bin/python" ]; then
  /usr/bin/python3 -m venv --system-site-packages "$VENV"
fi
stamp="$VENV/.dtn-migrate-deps"
want=$(cat "$TOP/requirements.txt" "$TOP/test-requirements.txt" \
       "$TOP/setup.cfg" | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  "$VENV/bin/pip" install -q -U pip >/dev/null
  "$VENV/bin/pip" install -q -r "$TOP/requirements.txt" \
    -r "$TOP/test-requirements.txt"
  "$VENV/bin/pip" install -q -e "$TOP"
  echo "$want" > "$stamp"
fi
# A benchmark's figures need the benchmarks' extra (matplotlib), which
# the service and its tests do not: installed when a benchmark runs.
if [ "${DTN_BENCH:-0}" = 1 ]; then
  bench_stamp="$VENV/.dtn-migrate-bench-deps"
  if [ "$(cat "$bench_stamp" 2>/dev/null)" != "$want" ]; then
    "$VENV/bin/pip" install -q -e "${TOP}[benchmarks]"
    echo "$want" > "$bench_stamp"
  fi
fi
export PATH="$VENV/bin:$PATH"
