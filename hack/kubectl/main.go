// Command kubectl is the upstream kubectl, built from the pinned k8s.io/kubectl module for
// machines without one on PATH (hack/kubectl.sh). Same entry point as k8s.io/kubernetes/cmd/kubectl.
package main

import (
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err)
	}
}
