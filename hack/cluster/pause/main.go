// Command pause is the test cluster's pod sandbox process (the role of Kubernetes' own pause
// image): it holds the pod's namespaces, reaps the children a shared process namespace hands
// it, and exits on SIGINT or SIGTERM. hack/cluster/images.sh builds it statically into the
// image the cluster's containerd uses as sandbox_image.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			return
		}
		reap()
	}
}

// reap collects every child that has exited, so none stays a zombie.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
