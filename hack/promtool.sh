#!/usr/bin/env bash
# Installs promtool (Debian package prometheus, 2.42 on bookworm) for the alert tests in
# test/integration/observability, which run `promtool check rules` and `promtool test rules`
# on charts/ratelimit-operator/files/alerts.yaml. Skipped when promtool is already on PATH, so
# it is idempotent and fast. The package also installs and starts a Prometheus server (on
# :9090, the sidecar's default metrics port): if the install started one, it is stopped again
# by systemctl or by its pidfile, never by process name.
set -euo pipefail

as_root() {
  if [[ $(id -u) -eq 0 ]]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    echo "promtool: need root (or sudo) to run: $*" >&2
    exit 1
  fi
}

pidfile=/run/prometheus/prometheus.pid

# running prints the pid of the packaged server when its pidfile names a live process.
running() {
  [[ -s $pidfile ]] || return 1
  local pid
  pid=$(<"$pidfile")
  [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

# stop_package_service stops a server the package install started. Only called when none ran
# before the install, so whatever runs now was started by it.
stop_package_service() {
  if command -v systemctl >/dev/null 2>&1 && [[ -d /run/systemd/system ]]; then
    as_root systemctl disable --now prometheus >/dev/null 2>&1 || true
  fi
  local pid
  if pid=$(running); then
    echo "promtool: stopping the packaged prometheus the install started (pid $pid)" >&2
    as_root kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 100); do
      running >/dev/null || return 0
      sleep 0.1
    done
    echo "promtool: warning: prometheus (pid $pid) still runs" >&2
  fi
}

install_promtool() {
  local was_running=false
  if running >/dev/null; then was_running=true; fi
  echo "promtool: installing the prometheus package (for promtool) with apt-get" >&2
  as_root apt-get update
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus
  [[ $was_running == true ]] || stop_package_service
}

if ! command -v promtool >/dev/null 2>&1; then
  install_promtool
fi
command -v promtool >/dev/null 2>&1 || { echo "promtool: still missing after install" >&2; exit 1; }
promtool --version 2>&1 | head -1
