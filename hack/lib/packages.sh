# Shared by hack/redis.sh, hack/proxies.sh and hack/promtool.sh (sourced, not run): install
# Debian packages when a tool is missing, and stop again a service that the install started,
# by systemctl or by its pidfile, never by process name. Each script sets `name` (its log
# prefix) before sourcing this.

# as_root runs its arguments as root: directly, or through sudo.
as_root() {
  if [[ $(id -u) -eq 0 ]]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    echo "$name: need root (or sudo) to run: $*" >&2
    exit 1
  fi
}

# apt_install installs the packages named, non-interactively, without recommends.
apt_install() {
  echo "$name: installing $* with apt-get" >&2
  as_root apt-get update
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@"
}

# have_systemd reports whether systemd runs this machine's services.
have_systemd() {
  command -v systemctl >/dev/null 2>&1 && [[ -d /run/systemd/system ]]
}

# service_active reports whether systemd runs the named unit.
service_active() {
  have_systemd && systemctl is-active --quiet "$1"
}

# disable_service stops the named systemd unit and keeps it from starting at boot.
disable_service() {
  if have_systemd; then
    as_root systemctl disable --now "$1" >/dev/null 2>&1 || true
  fi
}

# pidfile_pid prints the pid the file names when that process is alive.
pidfile_pid() {
  local pidfile=$1 pid
  [[ -s $pidfile ]] || return 1
  pid=$(<"$pidfile")
  [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

# stop_pidfile sends the signal to the process the pidfile names and waits up to 10s for
# it to go; what names it in the log.
stop_pidfile() {
  local what=$1 pidfile=$2 signal=$3 pid
  pid=$(pidfile_pid "$pidfile") || return 0
  echo "$name: stopping the $what the install started (pid $pid)" >&2
  as_root kill "-$signal" "$pid" 2>/dev/null || true
  for _ in $(seq 100); do
    pidfile_pid "$pidfile" >/dev/null || return 0
    sleep 0.1
  done
  echo "$name: warning: $what (pid $pid) still runs" >&2
}
