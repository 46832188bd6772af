// Command etcd is the test control plane's etcd, built from the etcd
// module through the Go module proxy at the version Kubernetes v1.32.4
// pins (3.5.16). Debian bookworm's etcd-server is 3.4.23, older than the
// watch-progress fixes (3.4.31, 3.5.13) that kube-apiserver requires
// before it serves a consistent read from its watch cache; with it, every
// consistent pod list went to etcd, which no production cluster does. A
// module of its own keeps etcd's dependencies out of the product's go.mod.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
