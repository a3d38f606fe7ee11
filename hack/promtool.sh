#!/usr/bin/env bash
# Installs promtool (Debian package prometheus, 2.42 on bookworm) for the alert tests in
# test/integration/observability, which run `promtool check rules` and `promtool test rules`
# on charts/ratelimit-operator/files/alerts.yaml. Skipped when promtool is already on PATH, so
# it is idempotent and fast. The package also installs and starts a Prometheus server (on
# :9090, the sidecar's default metrics port): if the install started one, it is stopped again
# by systemctl or by its pidfile, never by process name.
set -euo pipefail
name=promtool
# shellcheck source=lib/packages.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/packages.sh"

pidfile=/run/prometheus/prometheus.pid

install_promtool() {
  local was_running=false
  if service_active prometheus || pidfile_pid "$pidfile" >/dev/null; then was_running=true; fi
  apt_install prometheus
  if [[ $was_running == false ]]; then
    disable_service prometheus
    stop_pidfile "packaged prometheus" "$pidfile" TERM
  fi
}

if ! command -v promtool >/dev/null 2>&1; then
  install_promtool
fi
command -v promtool >/dev/null 2>&1 || { echo "$name: still missing after install" >&2; exit 1; }
promtool --version 2>&1 | head -1
