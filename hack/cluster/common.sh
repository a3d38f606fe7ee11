# shellcheck shell=bash
# What cluster.sh and images.sh share: the repository's root, the package helpers, and where
# the binaries built from the pinned k8s.io/kubernetes module are cached (beside envtest's).
# Sourced after `here` (this folder) and `name` (the log prefix) are set.

repo=$(cd "$here/../.." && pwd)
# shellcheck source=../lib/packages.sh
source "$repo/hack/lib/packages.sh"

k8s_version=$(awk '$1=="k8s.io/kubernetes"{sub(/^v/,"",$2); print $2}' "$repo/hack/envtest/go.mod")
arch=$(go env GOARCH)
cache=${ENVTEST_CACHE:-$HOME/.local/share/kubebuilder-envtest}
k8s_bin="$cache/k8s/${k8s_version}-linux-${arch}"
