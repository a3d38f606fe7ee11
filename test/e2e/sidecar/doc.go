// Package sidecar holds the end-to-end tests of the real cmd/sidecar binary: a real
// redis-server, a real upstream, the snapshot as a kubelet-style mounted file.
package sidecar
