//go:build tools

// Package tools records the main packages this module builds, so go mod tidy keeps them:
// the envtest control plane (hack/envtest.sh) and the rest of a single-node cluster
// (hack/cluster/cluster.sh), and agnhost, the example app's upstream image.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "k8s.io/kubernetes/test/images/agnhost"
)
