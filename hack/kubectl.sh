#!/usr/bin/env bash
# Prints the path of a kubectl: the one on PATH, or one built from the Go module proxy, pinned
# by hack/kubectl/go.mod, into a cache outside the clone (about two minutes cold on two cores).
# With --pinned, always the pinned one: the real cluster (hack/cluster) runs the pinned
# Kubernetes, which a kubectl on PATH may be too old for. Progress goes to stderr.
set -euo pipefail

if [[ ${1:-} != --pinned ]] && command -v kubectl >/dev/null 2>&1; then
  command -v kubectl
  exit 0
fi

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
version=$(awk '$1=="k8s.io/kubectl"{sub(/^v0/,"1",$2); print $2}' "$here/kubectl/go.mod")
cache=${ENVTEST_CACHE:-$HOME/.local/share/kubebuilder-envtest}
bin="$cache/kubectl/v${version}/kubectl"
if [[ -x "$bin" ]]; then
  echo "$bin"
  exit 0
fi

mkdir -p "$(dirname "$bin")"
ldflags="-s -w"
for p in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
  ldflags+=" -X $p.gitVersion=v${version} -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
done
echo "kubectl: none on PATH; building kubectl v${version} from source (cached afterwards)..." >&2
start=$SECONDS
(cd "$here/kubectl" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$bin.tmp" .)
mv "$bin.tmp" "$bin"
echo "kubectl: built in $((SECONDS - start))s at $bin" >&2
echo "$bin"
