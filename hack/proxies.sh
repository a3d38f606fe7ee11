#!/usr/bin/env bash
# Installs the Debian packages caddy and nginx-light, the real proxies the forward-auth tests
# (test/e2e/gateways) and benchmark (test/bench/internal/forwardauthbench) put in front of the
# sidecar. Skipped when both binaries are already on PATH (or in /usr/sbin), so it is
# idempotent and fast. If the package install starts Debian's own service (nginx on port 80,
# caddy under systemd), it is stopped again (by systemctl or by nginx's pidfile, never by
# process name) so nothing the tests did not start keeps running; the tests start their own
# processes on free loopback ports with their own configs.
set -euo pipefail

# nginx lives in /usr/sbin, which a non-root PATH may lack; the tests look there too.
export PATH="$PATH:/usr/sbin"

have_proxies() {
  command -v caddy >/dev/null 2>&1 && command -v nginx >/dev/null 2>&1
}

as_root() {
  if [[ $(id -u) -eq 0 ]]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    echo "proxies: need root (or sudo) to run: $*" >&2
    exit 1
  fi
}

have_systemd() {
  command -v systemctl >/dev/null 2>&1 && [[ -d /run/systemd/system ]]
}

service_active() {
  have_systemd && systemctl is-active --quiet "$1"
}

nginx_pid() {
  local pidfile=/run/nginx.pid pid
  [[ -s $pidfile ]] || return 1
  pid=$(<"$pidfile")
  [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

# Stops the services the install started. Only those not running before it are stopped.
stop_package_services() {
  local caddy_was=$1 nginx_was=$2 pid
  if [[ $caddy_was == false ]] && service_active caddy; then
    echo "proxies: stopping the caddy service the install started" >&2
    as_root systemctl disable --now caddy >/dev/null 2>&1 || true
  fi
  if [[ $nginx_was == false ]]; then
    if service_active nginx; then
      echo "proxies: stopping the nginx service the install started" >&2
      as_root systemctl disable --now nginx >/dev/null 2>&1 || true
    fi
    if pid=$(nginx_pid); then
      echo "proxies: stopping the nginx the install started (pid $pid)" >&2
      as_root kill -QUIT "$pid" 2>/dev/null || true
      for _ in $(seq 50); do
        nginx_pid >/dev/null || return 0
        sleep 0.1
      done
      echo "proxies: warning: nginx (pid $pid) still runs" >&2
    fi
  fi
}

install_proxies() {
  local caddy_was=false nginx_was=false
  if service_active caddy; then caddy_was=true; fi
  if service_active nginx || nginx_pid >/dev/null; then nginx_was=true; fi
  echo "proxies: installing caddy and nginx-light with apt-get" >&2
  as_root apt-get update
  as_root env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends caddy nginx-light
  stop_package_services "$caddy_was" "$nginx_was"
}

if ! have_proxies; then
  install_proxies
fi
have_proxies || { echo "proxies: caddy/nginx still missing after install" >&2; exit 1; }
caddy version
nginx -v
