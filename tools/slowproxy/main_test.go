package main

import (
	"bytes"
	"encoding/binary"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// start runs a proxy with delay d and jitter j in front of an echo server and
// returns the proxy and its listening address.
func start(t *testing.T, d, j time.Duration) (*proxy, string) {
	t.Helper()
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { echo.Close() })
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() {
				// Echo, then forward the half close.
				_, _ = io.Copy(c, c)
				_ = c.(*net.TCPConn).CloseWrite()
			}()
		}
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	p := &proxy{log: log.New(io.Discard, "", 0), rnd: rand.New(rand.NewPCG(1, 2)), delay: d, jitter: j}
	go p.serve(ln, echo.Addr().String())
	return p, ln.Addr().String()
}

func TestOrderKeptUnderJitter(t *testing.T) {
	// Jitter larger than the gap between writes: without the ordering rule
	// chunks would overtake each other.
	_, addr := start(t, 20*time.Millisecond, 15*time.Millisecond)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n = 200
	var want bytes.Buffer
	go func() {
		for i := range n {
			var b [4]byte
			binary.BigEndian.PutUint32(b[:], uint32(i))
			_, _ = c.Write(b[:])
			time.Sleep(time.Millisecond)
		}
		_ = c.(*net.TCPConn).CloseWrite()
	}()
	for i := range n {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(i))
		want.Write(b[:])
	}
	// ReadAll ends only when the half close came back through both directions.
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("echo through the proxy differs: got %d bytes, want %d (reordered or lost)", len(got), want.Len())
	}
}

func TestDelayAppliesBothWaysAndChangesAtRuntime(t *testing.T) {
	p, addr := start(t, 0, 0)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	roundTrip := func() time.Duration {
		t.Helper()
		t0 := time.Now()
		if _, err := c.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
		return time.Since(t0)
	}
	roundTrip()
	// Raised on a connection that is already open: a lower bound only (a
	// busy machine makes it slower, never faster).
	dir := t.TempDir()
	f := filepath.Join(dir, "delay")
	if err := os.WriteFile(f, []byte("150ms\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := p.load(f); err != nil {
		t.Fatal(err)
	}
	if rt := roundTrip(); rt < 300*time.Millisecond {
		t.Fatalf("round trip %s with 150ms each way: want at least 300ms", rt)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, content string
		missing       bool
		delay, jitter time.Duration
		wantErr       bool
	}{
		{name: "missing file is no delay", missing: true},
		{name: "empty", content: ""},
		{name: "delay", content: "3s\n", delay: 3 * time.Second},
		{name: "delay and jitter", content: "200ms 50ms", delay: 200 * time.Millisecond, jitter: 50 * time.Millisecond},
		{name: "not a duration", content: "fast", wantErr: true},
		{name: "negative", content: "-1s", wantErr: true},
		{name: "three fields", content: "1s 1s 1s", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := filepath.Join(dir, tc.name)
			if !tc.missing {
				if err := os.WriteFile(f, []byte(tc.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			p := &proxy{log: log.New(io.Discard, "", 0), delay: time.Hour, jitter: time.Hour}
			err := p.load(f)
			if tc.wantErr {
				if err == nil {
					t.Fatal("want an error")
				}
				if p.delay != time.Hour {
					t.Fatal("a bad file changed the delay")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.delay != tc.delay || p.jitter != tc.jitter {
				t.Fatalf("got delay %s jitter %s, want %s %s", p.delay, p.jitter, tc.delay, tc.jitter)
			}
		})
	}
}
