# Footprint and speed, measured against a real etcd (docs/performance.md,
# docs/scaling.md). Every figure in those documents comes from these runs.
#
#   make bench         the table of the performance targets (about 6 minutes):
#                      prints it and writes docs/performance.md and its SVGs
#   make bench-scale   simulated fleets of 100, 1,000, 10,000 and 100,000 nodes
#                      (at most 10,000 publishing, the rest records kept alive)
#                      against a 3-member etcd, one interval per phase (idle,
#                      window closed, blocked before the lock, waiting in line,
#                      post-reboot) and a few admissions under the lock (bytes,
#                      time, etcd's apply time per admission); the lock's handover
#                      with 10 and 1,000 nodes waiting; 10,000 nodes again with
#                      client-certificate TLS (about 35 minutes on a quiet 2-core
#                      machine, much longer on a loaded one): writes docs/scaling.md;
#                      BENCH_PUBLISHERS=N runs at most N publishing nodes (10,000:
#                      a machine that cannot keep their schedule says so in warnings)
#   make bench-queue   only the 1,000-node queue figure (about 15 s)
#   make bench-smoke   each measurement once, tiny: checks only that it produces
#                      numbers (part of make test; writes nothing under docs/)
#
# etcd runs on random loopback ports in a temporary directory and is stopped
# afterwards, as is every process the benchmark starts.

BENCH_BIN  := $(TOOLS)/bench
CRDBENCH   := $(BENCH_BIN)/crdbench
BENCH_ARGS  = -bin $(BIN) -bench-bin $(BENCH_BIN) -etcd $(ETCD_BIN) -etcdctl $(ETCDCTL_BIN)

TEST_TARGETS += bench-smoke

.PHONY: bench bench-scale bench-smoke bench-tools bench-queue

# floor and stamp are built with the product's flags and Go's defaults (the
# floor stands for any Go program); crdbench is a test harness.
bench-tools:
	@mkdir -p $(BENCH_BIN)
	$(GOBUILD) -o $(BENCH_BIN)/floor ./bench/floor
	$(GOBUILD) -o $(BENCH_BIN)/stamp ./bench/stamp
	CGO_ENABLED=0 $(GO) build -o $(CRDBENCH) ./bench/crdbench

bench: build etcd bench-tools
	$(CRDBENCH) run $(BENCH_ARGS) -doc $(ROOT)/docs/performance.md

bench-scale: etcd bench-tools
	$(CRDBENCH) scale $(BENCH_ARGS) $(if $(BENCH_PUBLISHERS),-publishers $(BENCH_PUBLISHERS)) -doc $(ROOT)/docs/scaling.md

bench-smoke: build etcd bench-tools
	$(CRDBENCH) run -quick $(BENCH_ARGS)
	$(CRDBENCH) scale -quick $(BENCH_ARGS)

# The start-to-exit figures of the tools alone (about 20 s), for information.
bench-tools-time: build etcd bench-tools
	$(CRDBENCH) tools $(BENCH_ARGS)

# The admission alone at 100 to 100,000 nodes (about 3 minutes): per admission
# the bytes, the time and etcd's apply time, printed (docs/scaling.md is
# bench-scale's).
.PHONY: bench-admission
bench-admission: etcd bench-tools
	$(CRDBENCH) admission $(BENCH_ARGS)

# The 1,000-node queue alone (about 15 s): iterate on lib/lock's handover path.
bench-queue: etcd bench-tools
	$(CRDBENCH) queue $(BENCH_ARGS)
