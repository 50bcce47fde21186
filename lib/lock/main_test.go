package lock

import (
	"context"
	"os"
	"sort"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/lib/testonly/etcdtest"
)

// embedded is the etcd server the unit tests share (each test uses its own key).
var embedded *etcdtest.Server

func TestMain(m *testing.M) {
	os.Exit(etcdtest.RunMain(m, func(s *etcdtest.Server) { embedded = s },
		"github.com/clusterrebootd/clusterrebootd/lib/lock"))
}

// opts are test defaults: a short TTL and fast backoff.
func opts(key, node string) Options {
	return Options{
		Key: key, TTL: 3 * time.Second, Node: node, PID: os.Getpid(), Purpose: "test",
		Backoff:    Backoff{Min: 20 * time.Millisecond, Max: 200 * time.Millisecond},
		RPCTimeout: 2 * time.Second,
	}
}

func release(t testing.TB, h *Held) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.Release(ctx); err != nil {
		t.Errorf("release: %v", err)
	}
}

// handover has a hold key and b queue behind it, releases a's hold and
// returns how long b took from the release to holding. ok is false when b's
// Acquire failed (reported already).
func handover(t testing.TB, c *clientv3.Client, key string) (d time.Duration, ok bool) {
	t.Helper()
	ctx := context.Background()
	h, err := Acquire(ctx, c, opts(key, "a"))
	if err != nil {
		t.Fatal(err)
	}
	type acquired struct {
		h  *Held
		at time.Time
	}
	got := make(chan acquired, 1)
	queued := make(chan int, 1)
	go func() {
		o := opts(key, "b")
		o.OnQueued = func(int) { queued <- 1 }
		w, err := Acquire(ctx, c, o)
		if err != nil {
			t.Error(err)
			close(got)
			return
		}
		got <- acquired{w, time.Now()}
	}()
	<-queued
	released := time.Now()
	release(t, h)
	a, ok := <-got
	if !ok {
		return 0, false
	}
	release(t, a.h)
	return a.at.Sub(released), true
}

// interval is when one contender held the lock.
type interval struct {
	who        string
	start, end time.Time
}

// maxOverlap is the largest number of intervals that were open at once.
func maxOverlap(iv []interval) (int, string) {
	type ev struct {
		at    time.Time
		delta int
		who   string
	}
	var evs []ev
	for _, i := range iv {
		evs = append(evs, ev{i.start, +1, i.who}, ev{i.end, -1, i.who})
	}
	// Ends sort before starts at the same instant: touching is not overlapping.
	sort.Slice(evs, func(i, j int) bool {
		if !evs[i].at.Equal(evs[j].at) {
			return evs[i].at.Before(evs[j].at)
		}
		return evs[i].delta < evs[j].delta
	})
	open, most, who := 0, 0, ""
	for _, e := range evs {
		open += e.delta
		if open > most {
			most, who = open, e.who
		}
	}
	return most, who
}
