// Command etcd is the real etcd server, built from the pinned release in
// go.mod so that integration and end-to-end tests run against the same
// server operators deploy. Build it with `make etcd` (.tools/bin/etcd).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
