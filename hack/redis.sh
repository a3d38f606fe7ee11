#!/usr/bin/env bash
# Installs redis-server and redis-cli (Debian packages redis-server and redis-tools) for the
# test harness in test/support/redistest. Skipped when both binaries are already on PATH, so it is
# idempotent and fast. If the package install starts Debian's own service on port 6379, it is
# stopped again (by its pidfile or `redis-cli shutdown nosave`, never by process name) so the
# tests, which use their own private servers on free ports, do not share a stray daemon.
set -euo pipefail
name=redis
# shellcheck source=lib/packages.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/packages.sh"

have_redis() {
  command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1
}

default_port_up() {
  redis-cli -p 6379 ping 2>/dev/null | grep -q PONG
}

# Stops a server the package install left running on 6379. Only called when nothing answered
# on 6379 before the install, so whatever answers now was started by the package.
stop_package_service() {
  default_port_up || return 0
  echo "redis: stopping the packaged redis-server the install started on port 6379" >&2
  disable_service redis-server
  local pidfile=/run/redis/redis-server.pid pid
  if default_port_up && [[ -s $pidfile ]]; then
    pid=$(<"$pidfile")
    [[ $pid =~ ^[0-9]+$ ]] && as_root kill -TERM "$pid" 2>/dev/null || true
  fi
  for _ in $(seq 50); do
    default_port_up || return 0
    sleep 0.1
  done
  redis-cli -p 6379 shutdown nosave >/dev/null 2>&1 || true
  for _ in $(seq 50); do
    default_port_up || return 0
    sleep 0.1
  done
  echo "redis: warning: a redis-server still answers on port 6379" >&2
}

install_redis() {
  local was_up=false
  if command -v redis-cli >/dev/null 2>&1 && default_port_up; then was_up=true; fi
  apt_install redis-server redis-tools
  [[ $was_up == true ]] || stop_package_service
}

if ! have_redis; then
  install_redis
fi
have_redis || { echo "redis: redis-server/redis-cli still missing after install" >&2; exit 1; }
redis-server --version
