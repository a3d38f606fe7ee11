#!/usr/bin/env bash
# Installs the Debian packages caddy and nginx-light, the real proxies the forward-auth tests
# (test/e2e/gateways), the demo and the benchmark (test/bench/internal/forwardauthbench) put in
# front of the sidecar. Skipped when both binaries are already on PATH (or in /usr/sbin), so it
# is idempotent and fast. If the package install starts Debian's own service (nginx on port 80,
# caddy under systemd), it is stopped again (by systemctl or by nginx's pidfile, never by
# process name) so nothing the tests did not start keeps running; the tests start their own
# processes on free loopback ports with their own configs.
set -euo pipefail
name=proxies
# shellcheck source=lib/packages.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/packages.sh"

# nginx lives in /usr/sbin, which a non-root PATH may lack; the tests look there too.
export PATH="$PATH:/usr/sbin"
nginx_pidfile=/run/nginx.pid

have_proxies() {
  command -v caddy >/dev/null 2>&1 && command -v nginx >/dev/null 2>&1
}

# install_proxies installs both and stops the services the install started: only those that
# were not running before it.
install_proxies() {
  local caddy_was=false nginx_was=false
  if service_active caddy; then caddy_was=true; fi
  if service_active nginx || pidfile_pid "$nginx_pidfile" >/dev/null; then nginx_was=true; fi
  apt_install caddy nginx-light
  [[ $caddy_was == true ]] || disable_service caddy
  if [[ $nginx_was == false ]]; then
    disable_service nginx
    stop_pidfile nginx "$nginx_pidfile" QUIT
  fi
}

if ! have_proxies; then
  install_proxies
fi
have_proxies || { echo "$name: caddy/nginx still missing after install" >&2; exit 1; }
caddy version
nginx -v
