#!/usr/bin/env bash
# Builds the envtest control plane (kube-apiserver + etcd) from the Go module proxy, pinned by
# hack/envtest/go.mod, into a cache outside the clone laid out like setup-envtest's:
#   ${ENVTEST_CACHE:-$HOME/.local/share/kubebuilder-envtest}/k8s/<version>-linux-<arch>/
# Skipped when both binaries are present. Prints the directory for KUBEBUILDER_ASSETS on stdout;
# progress goes to stderr. A cold build takes about ten minutes on two cores.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
k8s_version=$(awk '$1=="k8s.io/kubernetes"{sub(/^v/,"",$2); print $2}' "$here/envtest/go.mod")
etcd_version=$(awk '$1=="go.etcd.io/etcd/server/v3"{print $2}' "$here/envtest/go.mod")
arch=$(go env GOARCH)
cache=${ENVTEST_CACHE:-$HOME/.local/share/kubebuilder-envtest}
dir="$cache/k8s/${k8s_version}-linux-${arch}"

if [[ -x "$dir/kube-apiserver" && -x "$dir/etcd" ]]; then
  echo "$dir"
  exit 0
fi

mkdir -p "$dir"
tmp=$(mktemp -d "$dir/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# Stamp the version the way Kubernetes' own build does, so `kubectl version` reports it.
pkg=k8s.io/client-go/pkg/version
base=k8s.io/component-base/version
ldflags="-s -w"
for p in "$pkg" "$base"; do
  ldflags+=" -X $p.gitVersion=v${k8s_version} -X $p.gitMajor=${k8s_version%%.*}"
  minor=${k8s_version#*.}; minor=${minor%%.*}
  ldflags+=" -X $p.gitMinor=${minor} -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
done

# build_with_progress LABEL OUT PKG LDFLAGS: go build with a progress line on stderr (packages
# compiled of the package's dependency count; redrawn on a terminal, every 20s in a log).
build_with_progress() {
  local label=$1 out=$2 pkg=$3 flags=$4 total n=0 t0=$SECONDS last=$SECONDS log="$tmp/$1.log"
  echo "envtest: $label: downloading modules..." >&2
  go mod download
  total=$(go list -deps "$pkg" | wc -l)
  CGO_ENABLED=0 go build -v -trimpath -ldflags "$flags" -o "$out" "$pkg" 2>&1 | tee "$log" | while IFS= read -r _; do
    n=$((n + 1))
    if [[ -t 2 ]]; then
      printf '\renvtest: %s: %d/%d packages compiled, %ds ' "$label" "$n" "$total" $((SECONDS - t0)) >&2
    elif ((SECONDS - last >= 20)); then
      echo "envtest: $label: $n/$total packages compiled, $((SECONDS - t0))s" >&2
      last=$SECONDS
    fi
  done || { echo >&2; cat "$log" >&2; return 1; }
  [[ -t 2 ]] && echo >&2
  echo "envtest: $label built in $((SECONDS - t0))s" >&2
}

cd "$here/envtest"
start=$SECONDS
echo "envtest: first run builds etcd ${etcd_version} and kube-apiserver v${k8s_version} from source (about 10 min on 2 cores; cached afterwards)" >&2
build_with_progress etcd "$tmp/etcd" go.etcd.io/etcd/server/v3 "-s -w"
build_with_progress kube-apiserver "$tmp/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver "$ldflags"
mv "$tmp/etcd" "$tmp/kube-apiserver" "$dir/"
echo "envtest: control plane ready in $((SECONDS - start))s at $dir" >&2
echo "$dir"
