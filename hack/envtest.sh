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

cd "$here/envtest"
start=$SECONDS
echo "envtest: building etcd ${etcd_version} (cached after the first run)..." >&2
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3
echo "envtest: etcd built in $((SECONDS - start))s; building kube-apiserver v${k8s_version} (about 10 min cold on 2 cores)..." >&2
CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$tmp/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
mv "$tmp/etcd" "$tmp/kube-apiserver" "$dir/"
echo "envtest: control plane ready in $((SECONDS - start))s at $dir" >&2
echo "$dir"
