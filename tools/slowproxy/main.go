// Command slowproxy is a TCP forwarder that adds latency, for the end-to-end
// fault tests (bats/e2e_latency.bats, docs/testing.md "Faults"). The kernel
// of the test machines has no netem, so a node's etcd traffic is sent through
// it instead.
//
// Synopsis:
//
//	slowproxy -route LISTEN=UPSTREAM [-route ...] -delay-file FILE [-addr-file FILE]
//
// Every chunk read from either side is written to the other side DELAY±JITTER
// after it was read, in the order it was read: a chunk is never sent before
// the one read before it on the same connection and direction (its due time is
// at least the previous chunk's), so HTTP/2 (gRPC) streams stay intact. Half
// closes are forwarded after the same delay.
//
// FILE holds "DELAY [JITTER]" as Go durations ("200ms 50ms", "3s"); a missing
// or empty file is no delay. It is read at the start and again on SIGHUP;
// each load prints "slowproxy: delay D jitter J (load N)" on stderr, which a
// test waits for to know the new delay applies to every chunk read from then
// on (chunks already queued keep their due time). LISTEN may use port 0;
// -addr-file then receives "LISTEN_ADDRESS UPSTREAM" lines, one per route,
// written atomically once every listener is up. SIGTERM or SIGINT end it.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
)

type routes []string

func (r *routes) String() string     { return strings.Join(*r, ",") }
func (r *routes) Set(v string) error { *r = append(*r, v); return nil }

func main() {
	var rs routes
	flag.Var(&rs, "route", "LISTEN=UPSTREAM, e.g. 127.0.0.1:0=127.0.0.1:2379 (repeatable)")
	delayFile := flag.String("delay-file", "", `file with "DELAY [JITTER]", read at start and on SIGHUP`)
	addrFile := flag.String("addr-file", "", "write \"LISTEN_ADDRESS UPSTREAM\" per route here once listening")
	flag.Parse()
	logger := log.New(os.Stderr, "slowproxy: ", log.LstdFlags|log.Lmicroseconds)
	if len(rs) == 0 || flag.NArg() > 0 {
		logger.Print("usage: slowproxy -route LISTEN=UPSTREAM [-route ...] -delay-file FILE [-addr-file FILE]")
		os.Exit(2)
	}
	p := &proxy{log: logger, rnd: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))}
	if err := p.load(*delayFile); err != nil {
		logger.Print(err)
		os.Exit(2)
	}
	var lines []string
	for _, r := range rs {
		listen, upstream, ok := strings.Cut(r, "=")
		if !ok || listen == "" || upstream == "" {
			logger.Printf("-route %q: want LISTEN=UPSTREAM", r)
			os.Exit(2)
		}
		ln, err := net.Listen("tcp", listen)
		if err != nil {
			logger.Print(err)
			os.Exit(1)
		}
		lines = append(lines, ln.Addr().String()+" "+upstream+"\n")
		go p.serve(ln, upstream)
	}
	if *addrFile != "" {
		if err := writeAtomic(*addrFile, strings.Join(lines, "")); err != nil {
			logger.Print(err)
			os.Exit(1)
		}
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)
	for s := range sig {
		if s != syscall.SIGHUP {
			return
		}
		if err := p.load(*delayFile); err != nil {
			logger.Printf("%v; keeping the previous delay", err)
		}
	}
}

func writeAtomic(path, content string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// proxy holds the current delay; every connection reads it per chunk.
type proxy struct {
	log           *log.Logger
	mu            sync.Mutex
	rnd           *rand.Rand
	loads         int
	delay, jitter time.Duration
}

// load reads "DELAY [JITTER]" from path (missing or empty: no delay).
func (p *proxy) load(path string) error {
	var d, j time.Duration
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		f := strings.Fields(string(b))
		if len(f) > 2 {
			return fmt.Errorf("%s: want \"DELAY [JITTER]\", got %q", path, b)
		}
		for i, s := range f {
			v, err := time.ParseDuration(s)
			if err != nil || v < 0 {
				return fmt.Errorf("%s: %q is not a duration such as 200ms", path, s)
			}
			if i == 0 {
				d = v
			} else {
				j = v
			}
		}
	}
	p.mu.Lock()
	p.delay, p.jitter = d, j
	p.loads++
	n := p.loads
	p.mu.Unlock()
	p.log.Printf("delay %s jitter %s (load %d)", d, j, n)
	return nil
}

// due is when a chunk read now may be written: now + delay ± jitter, but not
// before prev, the due time of the chunk read before it.
func (p *proxy) due(prev time.Time) time.Time {
	p.mu.Lock()
	d := p.delay
	if p.jitter > 0 {
		d += time.Duration(p.rnd.Int64N(2*int64(p.jitter)+1)) - p.jitter
	}
	p.mu.Unlock()
	t := time.Now().Add(max(d, 0))
	if t.Before(prev) {
		return prev
	}
	return t
}

func (p *proxy) serve(ln net.Listener, upstream string) {
	for {
		c, err := ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			p.log.Printf("accept on %s: %v", ln.Addr(), err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		go p.handle(c, upstream)
	}
}

// handle forwards one connection both ways until both directions ended or
// either side failed.
func (p *proxy) handle(client net.Conn, upstream string) {
	up, err := net.DialTimeout("tcp", upstream, 5*time.Second)
	if err != nil {
		p.log.Printf("dial %s: %v", upstream, err)
		client.Close()
		return
	}
	var once sync.Once
	quit := make(chan struct{})
	abort := func() { once.Do(func() { close(quit); client.Close(); up.Close() }) }
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pipe(client, up, quit, abort) }()
	go func() { defer wg.Done(); p.pipe(up, client, quit, abort) }()
	wg.Wait()
	abort()
}

type chunk struct {
	data []byte
	due  time.Time
	err  error // set on the last chunk: io.EOF (half close) or the read error
}

// pipe copies src to dst, each chunk delayed, in order. A reader goroutine
// stamps chunks as they arrive; this goroutine writes them when due.
func (p *proxy) pipe(src, dst net.Conn, quit chan struct{}, abort func()) {
	queue := make(chan chunk, 256)
	go func() {
		var prev time.Time
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 || err != nil {
				prev = p.due(prev)
				select {
				case queue <- chunk{data: buf[:n], due: prev, err: err}:
				case <-quit:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	for {
		var c chunk
		select {
		case c = <-queue:
		case <-quit:
			return
		}
		if wait := time.Until(c.due); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-quit:
				t.Stop()
				return
			}
		}
		if len(c.data) > 0 {
			if _, err := dst.Write(c.data); err != nil {
				abort()
				return
			}
		}
		if c.err != nil {
			if tc, ok := dst.(*net.TCPConn); ok && errors.Is(c.err, io.EOF) {
				_ = tc.CloseWrite()
				return
			}
			abort()
			return
		}
	}
}
