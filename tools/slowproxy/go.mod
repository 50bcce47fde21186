// A TCP forwarder that adds latency, for the end-to-end fault tests
// (bats/e2e_latency.bats). A module of its own, without dependencies, so it
// never touches the product's go.mod.
module github.com/clusterrebootd/clusterrebootd/tools/slowproxy

go 1.26.8
