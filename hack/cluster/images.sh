#!/usr/bin/env bash
# Container images without a Docker engine or a registry, with podman from Debian's packages.
#
#   hack/cluster/images.sh base                  the Dockerfile's base images, assembled locally
#                                                under the names its FROM lines use, when absent
#   hack/cluster/images.sh operator IMG OUT      `make docker-build CONTAINER_TOOL=podman`, saved
#   hack/cluster/images.sh pause OUT             the pod sandbox image (hack/cluster/pause)
#   hack/cluster/images.sh redis OUT             redis-server from Debian's package
#   hack/cluster/images.sh agnhost OUT           the example app's upstream, from the pinned module
#   hack/cluster/images.sh caddy OUT             Caddy from Debian's package (a gateway pod)
#   hack/cluster/images.sh retag IMG NEW OUT     IMG under a second name, saved
#   hack/cluster/images.sh prebuild              every image the cluster suite uses
#
# OUT is a docker-archive for `hack/cluster/cluster.sh import`. Images stay in podman's
# storage (/var/lib/containers, outside the clone), so a second run only saves them again.
# The base images are assembled only where no image of that name exists: a machine that can
# pull the real ones keeps them. They are stand-ins with what the build needs: the golang
# image is busybox with this machine's Go toolchain (its version must match the tag), the
# distroless one holds /etc/passwd with user nonroot (65532), CA certificates and /tmp.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
name=images
# shellcheck source=common.sh
source "$here/common.sh"
label=dev.ratelimit.assembled-by=hack/cluster/images.sh

log() { echo "images: $*" >&2; }

# podman runs podman the way this machine needs it: no systemd, so cgroupfs and a file log.
podman() { command podman --cgroup-manager=cgroupfs --events-backend=file "$@"; }

need_podman() {
  command -v podman >/dev/null 2>&1 || apt_install podman >&2
  command -v busybox >/dev/null 2>&1 || [[ -x /bin/busybox ]] || apt_install busybox-static >&2
}

# base_image ARG: the default of the Dockerfile's `ARG <ARG>=...`, fully qualified.
base_image() {
  local ref
  ref=$(awk -F= -v a="ARG $1" '$1==a {print $2}' "$repo/Dockerfile")
  [[ -n $ref ]] || { log "Dockerfile has no ARG $1"; exit 1; }
  # Short names are Docker Hub's library images.
  case $ref in
  */*/* | *.*/* | localhost/*) echo "$ref" ;;
  */*) echo "docker.io/$ref" ;;
  *) echo "docker.io/library/$ref" ;;
  esac
}

# etc_files ROOT: /etc/passwd and /etc/group with root and nonroot (65532), like distroless.
etc_files() {
  local root=$1
  mkdir -p "$root/etc" "$root/tmp" "$root/home/nonroot" "$root/etc/ssl/certs"
  chmod 1777 "$root/tmp"
  chown 65532:65532 "$root/home/nonroot"
  printf '%s\n' 'root:x:0:0:root:/root:/sbin/nologin' 'nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin' \
    'nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin' >"$root/etc/passwd"
  printf '%s\n' 'root:x:0:' 'nobody:x:65534:' 'nonroot:x:65532:' >"$root/etc/group"
  cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
}

# with_libs ROOT BIN...: the binaries and the shared libraries they load, at their paths.
with_libs() {
  local root=$1 b lib
  shift
  for b in "$@"; do
    cp -L --parents "$b" "$root"
    for lib in $(ldd "$b" 2>/dev/null | awk '$2=="=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}'); do
      [[ -e $root$lib ]] || cp -L --parents "$lib" "$root"
    done
  done
}

# import ROOT NAME CHANGE...: the directory as a one-layer image NAME.
import() {
  local root=$1 ref=$2 c args=()
  shift 2
  for c in "$@" "LABEL $label"; do args+=(--change "$c"); done
  tar --sort=name --numeric-owner --mtime=@0 -C "$root" -c . | podman import -q "${args[@]}" - "$ref" >/dev/null
}

# save OUT NAME...: the images as one docker-archive.
save() {
  local out=$1
  shift
  rm -f "$out"
  podman save -q --format docker-archive -m -o "$out" "$@"
}

base() {
  need_podman
  local golang distroless tmp
  golang=$(base_image GO_IMAGE)
  distroless=$(base_image BASE_IMAGE)
  tmp=$(mktemp -d)
  if ! podman image exists "$golang"; then
    local want have
    want=${golang##*:}
    want=${want%%-*}
    have=$(go env GOVERSION)
    [[ go$want == "$have" ]] || { log "the Dockerfile wants $golang, this machine has $have: cannot assemble it"; exit 1; }
    log "assembling $golang from busybox and this machine's $have"
    local r=$tmp/golang bb
    etc_files "$r"
    mkdir -p "$r/bin" "$r/usr/local" "$r/go/bin" "$r/root"
    bb=$(command -v busybox || echo /bin/busybox)
    cp "$bb" "$r/bin/busybox"
    for c in $("$bb" --list); do [[ -e $r/bin/$c ]] || ln -s busybox "$r/bin/$c"; done
    cp -a "$(go env GOROOT)" "$r/usr/local/go"
    rm -rf "$r/usr/local/go/test" "$r/usr/local/go/api"
    chmod 1777 "$r/go"
    import "$r" "$golang" \
      'ENV PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      "ENV GOLANG_VERSION=$want" 'ENV GOPATH=/go' 'ENV GOTOOLCHAIN=local' 'WORKDIR /go' 'CMD ["sh"]'
  fi
  if ! podman image exists "$distroless"; then
    log "assembling $distroless"
    local r=$tmp/distroless
    etc_files "$r"
    import "$r" "$distroless" 'USER 65532:65532' 'WORKDIR /home/nonroot' \
      'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      'ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt'
  fi
  rm -rf "$tmp"
}

operator() {
  local img=$1 out=$2 t0=$SECONDS
  base
  log "building $img from the Dockerfile with podman"
  make -s -C "$repo" docker-build CONTAINER_TOOL=podman IMG="$img" >&2
  log "built $img in $((SECONDS - t0))s"
  # Each source state leaves an untagged image and its build layers: keep a few days' worth
  # (the layer cache), not every build since the machine started.
  podman image prune -f --filter until=72h >/dev/null 2>&1 || true
  save "$out" "$img"
}

# simple NAME OUT BUILD...: an image assembled by the function BUILD into a directory, kept
# in podman's storage under NAME; OUT gets it saved.
simple() {
  local ref=$1 out=$2 tmp
  shift 2
  need_podman
  if ! podman image exists "$ref"; then
    tmp=$(mktemp -d)
    "$@" "$tmp/root" "$ref"
    rm -rf "$tmp"
  fi
  save "$out" "$ref"
}

pause_image() {
  local r=$1 ref=$2
  etc_files "$r"
  CGO_ENABLED=0 go build -C "$repo" -trimpath -ldflags "-s -w" -o "$r/pause" ./hack/cluster/pause
  import "$r" "$ref" 'ENTRYPOINT ["/pause"]' 'USER 65532:65532'
}

redis_image() {
  local r=$1 ref=$2
  "$repo/hack/redis.sh" >/dev/null
  etc_files "$r"
  with_libs "$r" "$(readlink -f "$(command -v redis-server)")" "$(readlink -f "$(command -v redis-cli)")"
  ln -sf "$(readlink -f "$(command -v redis-server)")" "$r/usr/bin/redis-server" 2>/dev/null || true
  mkdir -p "$r/data" && chown 65532:65532 "$r/data"
  import "$r" "$ref" 'ENTRYPOINT ["/usr/bin/redis-server"]' 'USER 65532:65532' 'WORKDIR /data'
}

agnhost_image() {
  local r=$1 ref=$2
  "$here/cluster.sh" build >/dev/null
  etc_files "$r"
  cp "$k8s_bin/agnhost" "$r/agnhost"
  import "$r" "$ref" 'ENTRYPOINT ["/agnhost"]'
}

caddy_image() {
  local r=$1 ref=$2
  "$repo/hack/proxies.sh" >/dev/null
  etc_files "$r"
  with_libs "$r" "$(command -v caddy)"
  import "$r" "$ref" 'ENTRYPOINT ["/usr/bin/caddy"]' 'USER 65532:65532' \
    'ENV XDG_CONFIG_HOME=/tmp' 'ENV XDG_DATA_HOME=/tmp' 'ENV HOME=/tmp'
}

redis_version() { dpkg-query -W -f '${Version}' redis-server 2>/dev/null | sed 's/^[0-9]*://; s/[^A-Za-z0-9_.-]/_/g'; }
caddy_version() { dpkg-query -W -f '${Version}' caddy 2>/dev/null | sed 's/^[0-9]*://; s/[^A-Za-z0-9_.-]/_/g'; }

# The names the cluster's pods use. agnhost keeps the public name the sample deploys.
ref() {
  case $1 in
  pause) echo localhost/ratelimit-cluster/pause:1 ;;
  redis) echo "localhost/ratelimit-cluster/redis:$(redis_version)" ;;
  agnhost) awk '$1=="image:" && $2 ~ /agnhost/ {print $2; exit}' "$repo/config/samples/example-app-sidecar/deployment.yaml" ;;
  caddy) echo "localhost/ratelimit-cluster/caddy:$(caddy_version)" ;;
  esac
}

# prebuild builds every image the cluster suite (test/support/cluster) uses, discarding the
# archives: the suite saves them again in seconds.
prebuild() {
  local tmp n
  tmp=$(mktemp -d)
  "$repo/hack/redis.sh" >/dev/null
  "$repo/hack/proxies.sh" >/dev/null 2>&1
  operator localhost/ratelimit-operator:e2e "$tmp/operator.tar"
  for n in pause redis agnhost caddy; do
    simple "$(ref "$n")" "$tmp/$n.tar" "${n}_image"
  done
  rm -rf "$tmp"
}

case ${1:-} in
base) base ;;
prebuild) prebuild ;;
operator) operator "$2" "$3" ;;
pause | redis | agnhost | caddy)
  [[ $1 == redis ]] && "$repo/hack/redis.sh" >/dev/null
  [[ $1 == caddy ]] && "$repo/hack/proxies.sh" >/dev/null
  r=$(ref "$1")
  simple "$r" "$2" "$1_image"
  echo "$r"
  ;;
ref) ref "$2" ;;
retag)
  need_podman
  podman tag "$2" "$3"
  save "$4" "$3"
  ;;
*)
  echo "usage: $0 base|operator IMG OUT|pause OUT|redis OUT|agnhost OUT|caddy OUT|retag IMG NEW OUT|ref NAME" >&2
  exit 1
  ;;
esac
