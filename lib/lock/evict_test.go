package lock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/testsupport"
)

// An evicted waiter stops with ErrEvicted (exit 4) at once instead of
// queueing again and later holding the lock; the line moves on without it.
func TestEvictWaiter(t *testing.T) {
	for _, maxHolders := range []int{1, 2} {
		t.Run(map[int]string{1: "one holder", 2: "two holders"}[maxHolders], func(t *testing.T) {
			c := testsupport.NewClient(t, embedded.Endpoint)
			ctx := context.Background()
			key := "/t/evict-waiter/" + map[int]string{1: "one", 2: "two"}[maxHolders]
			var holders []*Held
			for i := 0; i < maxHolders; i++ {
				o := opts(key, "holder")
				o.MaxHolders = maxHolders
				h, err := Acquire(ctx, c, o)
				if err != nil {
					t.Fatal(err)
				}
				defer release(t, h)
				holders = append(holders, h)
			}
			o := opts(key, "stuck-waiter")
			o.MaxHolders = maxHolders
			queued := make(chan struct{})
			o.OnQueued = func(int) { close(queued) }
			errc := make(chan error, 1)
			go func() {
				h, err := Acquire(ctx, c, o)
				if h != nil {
					release(t, h)
				}
				errc <- err
			}()
			<-queued
			got, err := Evict(ctx, c, key, "stuck-waiter")
			if err != nil || len(got) != 1 {
				t.Fatalf("Evict = %+v, %v; want the waiter", got, err)
			}
			select {
			case err := <-errc:
				if !errors.Is(err, ErrEvicted) || exitcode.CodeOf(err) != exitcode.LockBusy {
					t.Fatalf("the evicted waiter's Acquire = %v (exit %d), want ErrEvicted, exit 4", err, exitcode.CodeOf(err))
				}
			case <-time.After(10 * time.Second):
				// Well before Recheck (30 s): the waiter watches its own entry.
				t.Fatal("the evicted waiter did not stop")
			}
			for _, h := range holders {
				if h.Err() != nil {
					t.Fatalf("a holder lost the lock: %v", h.Err())
				}
			}
			info, err := Entries(ctx, c, key)
			if err != nil || len(info.Waiters) != 0 || len(info.Holders) != maxHolders {
				t.Fatalf("after the eviction: %+v, %v; want the holders only", info, err)
			}
		})
	}
}

// A waiter whose lease is lost (not evicted) still queues again.
func TestWaiterWithLostLeaseQueuesAgain(t *testing.T) {
	c := testsupport.NewClient(t, embedded.Endpoint)
	ctx := context.Background()
	key := "/t/evict-lease-lost/lock"
	h, err := Acquire(ctx, c, opts(key, "holder"))
	if err != nil {
		t.Fatal(err)
	}
	o := opts(key, "waiter")
	queued := make(chan struct{}, 2)
	o.OnQueued = func(int) { queued <- struct{}{} }
	got := make(chan *Held, 1)
	go func() {
		w, err := Acquire(ctx, c, o)
		if err != nil {
			t.Error(err)
		}
		got <- w
	}()
	<-queued
	info, err := Entries(ctx, c, key)
	if err != nil || len(info.Waiters) != 1 {
		t.Fatalf("entries %+v, %v", info, err)
	}
	id, _ := ParseLeaseID(info.Waiters[0].LeaseID)
	if _, err := c.Revoke(ctx, id); err != nil {
		t.Fatal(err)
	}
	<-queued // in line again, with a new lease
	release(t, h)
	select {
	case w := <-got:
		release(t, w)
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter did not get the lock after its lease was lost and the holder left")
	}
}

// An entry without a lease blocks the line for ever; EvictLeaseless
// removes it (and nothing else), and the waiter behind it gets the lock.
func TestEvictLeaseless(t *testing.T) {
	c := testsupport.NewClient(t, embedded.Endpoint)
	ctx := context.Background()
	key := "/t/evict-leaseless/lock"
	if _, err := c.Put(ctx, key+"/deadbeef", "restored from a backup"); err != nil {
		t.Fatal(err)
	}
	o := opts(key, "waiter")
	queued := make(chan struct{})
	o.OnQueued = func(int) { close(queued) }
	got := make(chan *Held, 1)
	go func() {
		w, err := Acquire(ctx, c, o)
		if err != nil {
			t.Error(err)
		}
		got <- w
	}()
	<-queued
	removed, err := EvictLeaseless(ctx, c, key)
	if err != nil || len(removed) != 1 || removed[0].Entry != key+"/deadbeef" {
		t.Fatalf("EvictLeaseless = %+v, %v; want the leaseless entry only", removed, err)
	}
	select {
	case w := <-got:
		release(t, w)
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter did not get the lock once the leaseless entry was gone")
	}
}
