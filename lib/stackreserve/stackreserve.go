// Package stackreserve grows the main goroutine's stack once, at start-up,
// to the size the short-lived tools end up needing anyway.
//
// A goroutine starts with an 8 KiB stack; yaml.v3 (compiling its regular
// expressions during package initialisation, then parsing the configuration)
// needs about 32 KiB, so the runtime grows the stack twice, each time
// allocating a new one and walking every frame to copy it. Here it grows
// once, while the stack holds only a frame or two. On a 2-core VM this saves
// about 0.6 ms of crd-detect's 10 ms from start to exit (docs/performance.md).
//
// Import it for its side effect from a tool's main package:
//
//	import _ "github.com/clusterrebootd/clusterrebootd/lib/stackreserve"
//
// It imports nothing, and its path sorts before gopkg.in/ and internal/, so
// Go's initialisation order (by import path, among packages whose imports are
// ready) runs it before those packages' init. The long-running daemon does
// not import it: its idle footprint counts, and the garbage collector would
// shrink the stack again anyway.
package stackreserve

// Size is the stack the main goroutine has after init: reserve's frame plus
// the runtime's guard, rounded up to a power of two by the runtime.
const Size = 32 << 10

func init() { reserve(0) }

// reserve has a frame of about 24 KiB, so calling it makes the runtime grow
// the stack to 32 KiB in one step. The array is only touched when n > 0
// (never): the pages of the new stack stay untouched until they are used.
//
//go:noinline
func reserve(n int) {
	if n > 0 {
		var buf [Size - 8<<10]byte
		sink(buf[:n])
	}
}

//go:noinline
func sink(b []byte) { b[0] = 1 }
