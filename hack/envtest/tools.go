//go:build tools

// Package tools records the main packages this module builds, so go mod tidy keeps them.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
