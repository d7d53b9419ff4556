// Command pause is the sandbox ("pause") container of the local node
// (hack/node.sh): it holds a pod's namespaces, reaps the zombies that end up
// as its children (it is PID 1 of the pod when the PID namespace is
// shared), and exits cleanly on SIGINT or SIGTERM. It replaces
// registry.k8s.io/pause, which cannot be pulled on an offline machine.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var status syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
