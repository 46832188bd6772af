// Command pause is the real-cluster tests' only container process: the pod
// sandbox ("pause") image, which must be built here because no registry can
// be reached, and the stand-in for a runner. With no arguments it waits for
// SIGTERM or SIGINT and exits 0, as a sandbox must; `pause exit N` exits at
// once with status N, which the kubelet records as a failed runner.
package main

import (
	"os"
	"os/signal"
	"strconv"
	"syscall"
)

func main() {
	if len(os.Args) == 3 && os.Args[1] == "exit" {
		code, err := strconv.Atoi(os.Args[2])
		if err != nil {
			os.Exit(2)
		}
		os.Exit(code)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
}
