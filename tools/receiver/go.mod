// A local HTTP receiver for notifications: the demo prints what it gets and
// the end-to-end tests read it. A module of its own, without dependencies,
// so it never touches the product's go.mod.
module github.com/clusterrebootd/clusterrebootd/tools/receiver

go 1.26.8
