// Command etcdctl is the real etcdctl, built from the pinned release in the
// parent go.mod. Build it with `make etcd` (.tools/bin/etcdctl).
package main

import "go.etcd.io/etcd/etcdctl/v3/ctlv3"

func main() { ctlv3.MustStart() }
