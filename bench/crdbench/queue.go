package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/clusterrebootd/clusterrebootd/lib/lock"
)

// queueResult is what the queue run observed.
type queueResult struct {
	nodes       int
	perSecond   float64
	handoversMS []float64
	fifo        bool
	overlap     int
	etcdBefore  float64
	etcdPeak    float64
	etcdAfter   float64
	enqueue     time.Duration
	passthrough time.Duration
}

// passage is one node's turn.
type passage struct {
	acquired, released time.Time
	token              int64
}

// queueRun queues n nodes on one lock (lib/lock, one process, a few shared
// clients, one lease per node, entries queued strictly one after another)
// and lets them pass through: each holder releases as soon as it holds.
func (b *bench) queueRun(ctx context.Context, n, run int) (queueResult, error) {
	res := queueResult{nodes: n}
	const clients = 8
	var cs []*clientv3.Client
	for range clients {
		c, err := clientv3.New(clientv3.Config{Endpoints: b.endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			return res, err
		}
		defer c.Close()
		cs = append(cs, c)
	}
	res.etcdBefore, _ = b.etcdRSS()
	stopPeak := make(chan struct{})
	peakDone := make(chan float64)
	go func() {
		peak := res.etcdBefore
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stopPeak:
				peakDone <- peak
				return
			case <-t.C:
				if r, err := b.etcdRSS(); err == nil {
					peak = max(peak, r)
				}
			}
		}
	}()

	// Each run queues on a lock of its own, on an etcd whose history is
	// compacted, as a production etcd with auto-compaction keeps it: a later
	// run must not pay for the deleted entries of the earlier ones.
	key := fmt.Sprintf("/bench/queue-%d-run%d/lock", n, run)
	if err := compactAll(ctx, cs[0]); err != nil {
		return res, err
	}
	turns := make([]passage, n)
	var (
		orderMu sync.Mutex
		order   []int
		wg      sync.WaitGroup
		errOnce sync.Once
		runErr  error
	)
	fail := func(err error) { errOnce.Do(func() { runErr = err }) }
	releaseFirst := make(chan struct{})
	t0 := time.Now()
	for i := range n {
		ready := make(chan struct{})
		var readyOnce sync.Once
		signal := func() { readyOnce.Do(func() { close(ready) }) }
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := lock.Acquire(ctx, cs[i%clients], lock.Options{Key: key, TTL: 60 * time.Second,
				Node: fmt.Sprintf("node-%04d", i), PID: i, Purpose: "bench queue",
				OnQueued: func(int) { signal() }})
			if err != nil {
				signal()
				fail(fmt.Errorf("node %d: %w", i, err))
				return
			}
			signal()
			acquired := time.Now()
			orderMu.Lock()
			order = append(order, i)
			orderMu.Unlock()
			if i == 0 {
				<-releaseFirst
			}
			released := time.Now()
			turns[i] = passage{acquired: acquired, released: released, token: h.FencingToken()}
			rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := h.Release(rctx); err != nil {
				fail(fmt.Errorf("node %d release: %w", i, err))
			}
		}()
		select {
		case <-ready:
		case <-time.After(30 * time.Second):
			return res, fmt.Errorf("node %d was not queued within 30 s", i)
		}
	}
	res.enqueue = time.Since(t0)
	close(releaseFirst)
	wg.Wait()
	res.etcdPeak = <-peakDoneAfter(stopPeak, peakDone)
	res.etcdAfter, _ = b.etcdRSS()
	if runErr != nil {
		return res, runErr
	}
	res.fifo = len(order) == n
	for k, i := range order {
		if i != k {
			res.fifo = false
		}
	}
	for i := 1; i < n; i++ {
		prev, cur := turns[i-1], turns[i]
		if cur.acquired.Before(prev.released) {
			res.overlap++
		}
		if cur.token <= prev.token {
			res.fifo = false
		}
		res.handoversMS = append(res.handoversMS, ms(cur.acquired.Sub(prev.released)))
	}
	res.passthrough = turns[n-1].acquired.Sub(turns[0].released)
	if res.passthrough > 0 {
		res.perSecond = float64(n-1) / res.passthrough.Seconds()
	}
	return res, nil
}

// endpoints are the etcd the measurements use: the 3-member cluster of
// make bench-scale while it runs, else the single member.
func (b *bench) endpoints() []string {
	if b.cluster != nil {
		return b.cluster.endpoints
	}
	return []string{b.etcd.Endpoint}
}

// etcdRSS is that etcd's VmRSS in MiB (summed over the members).
func (b *bench) etcdRSS() (float64, error) {
	if b.cluster != nil {
		rss, _ := b.cluster.usage()
		return rss, nil
	}
	return rssMiB(b.etcd.PID)
}

// compactAll compacts etcd's history up to its current revision.
func compactAll(ctx context.Context, c *clientv3.Client) error {
	r, err := c.Get(ctx, "/bench/compact")
	if err != nil {
		return err
	}
	_, err = c.Compact(ctx, r.Header.Revision, clientv3.WithCompactPhysical())
	if errors.Is(err, rpctypes.ErrCompacted) {
		return nil // nothing written since the last compaction
	}
	return err
}

// peakDoneAfter stops the sampler and returns its answer channel.
func peakDoneAfter(stop chan struct{}, done chan float64) chan float64 {
	close(stop)
	return done
}
