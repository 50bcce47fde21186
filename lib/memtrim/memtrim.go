// Package memtrim returns the clean pages of the running executable's
// read-only file mappings to the page cache, so that an idle daemon's
// resident set holds only what it uses.
//
// The Go runtime reads the whole function table (pclntab) when a program
// starts, so right after start-up nearly every page of the executable's
// text (r-xp) and read-only data (r--p) mappings is resident: most of an
// idle daemon's VmRSS, which an idle loop never touches again
// (docs/performance.md, "Memory").
// Trim calls madvise(MADV_DONTNEED) on exactly those two kinds of mapping
// of /proc/self/exe. The kernel drops the process's references to the
// pages; the next access faults them in again from the page cache (or the
// disk). Nothing is lost because:
//
//   - only mappings of the executable file with permissions r-xp or r--p
//     are touched: never writable mappings (rw-p: .data, .bss) and never
//     anonymous memory (heap, stacks);
//   - a mapping with any copy-on-write page (smaps "Anonymous" above 0 kB:
//     written at some point, e.g. relocations of a position-independent
//     binary or a debugger's breakpoint) is skipped, since dropping such a
//     page would bring back the file's bytes in place of the written ones;
//   - the file under a running executable cannot be written in place
//     (ETXTBSY), and package managers replace binaries by rename, so the
//     old inode, and therefore the bytes a refault reads, stay the same.
//
// The cost is a few minor (or, under memory pressure, major) page faults
// when the daemon next runs code it had not run recently.
package memtrim

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Result says what Trim did.
type Result struct {
	// Mappings is the number of mappings advised.
	Mappings int `json:"mappings"`
	// ResidentBytes is what those mappings had resident before (smaps Rss).
	ResidentBytes uint64 `json:"resident_bytes"`
	// Skipped counts read-only mappings of the executable left alone
	// because they hold copy-on-write pages.
	Skipped int `json:"skipped"`
}

// region is one mapping of /proc/self/smaps.
type region struct {
	start, end uint64
	perms      string
	path       string
	rss        uint64 // bytes
	anonymous  uint64 // bytes
}

// readOnlyOf reports whether r is a read-only (r-xp or r--p) mapping of exe.
func (r region) readOnlyOf(exe string) bool {
	return r.path == exe && (r.perms == "r-xp" || r.perms == "r--p")
}

// Advisor advises the kernel about [start, start+length).
type Advisor func(start, length uintptr) error

// trim advises every clean read-only mapping of exe listed in smaps.
func trim(smaps io.Reader, exe string, advise Advisor) (Result, error) {
	var res Result
	regions, err := parseSmaps(smaps)
	if err != nil {
		return res, err
	}
	for _, r := range regions {
		if !r.readOnlyOf(exe) {
			continue
		}
		if r.anonymous > 0 {
			res.Skipped++
			continue
		}
		if err := advise(uintptr(r.start), uintptr(r.end-r.start)); err != nil {
			return res, fmt.Errorf("memtrim: madvise %x-%x %s: %w", r.start, r.end, r.path, err)
		}
		res.Mappings++
		res.ResidentBytes += r.rss
	}
	return res, nil
}

// parseSmaps reads the mappings of a /proc/PID/smaps file.
func parseSmaps(rd io.Reader) ([]region, error) {
	var out []region
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if r, ok := parseHeader(line); ok {
			out = append(out, r)
			continue
		}
		if len(out) == 0 {
			continue
		}
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch key {
		case "Rss":
			out[len(out)-1].rss = parseKB(val)
		case "Anonymous":
			out[len(out)-1].anonymous = parseKB(val)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("memtrim: reading smaps: %w", err)
	}
	return out, nil
}

// parseHeader parses "start-end perms offset dev inode [path]".
func parseHeader(line string) (region, bool) {
	var fields [5]string
	rest := line
	for i := range fields {
		rest = strings.TrimLeft(rest, " ")
		f, tail, _ := strings.Cut(rest, " ")
		if f == "" {
			return region{}, false
		}
		fields[i], rest = f, tail
	}
	lo, hi, ok := strings.Cut(fields[0], "-")
	if !ok {
		return region{}, false
	}
	start, err1 := strconv.ParseUint(lo, 16, 64)
	end, err2 := strconv.ParseUint(hi, 16, 64)
	if err1 != nil || err2 != nil || end < start || len(fields[1]) != 4 {
		return region{}, false
	}
	return region{start: start, end: end, perms: fields[1], path: strings.TrimLeft(rest, " ")}, true
}

// parseKB parses " 1234 kB" into bytes (0 when unreadable).
func parseKB(s string) uint64 {
	s = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "kB"))
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0
	}
	return n << 10
}
