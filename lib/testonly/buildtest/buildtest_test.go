package buildtest

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// What ships is what `go build` builds and `go test` tests: no //go:debug
// line in the product's Go files, no GOEXPERIMENT in the Makefile's rules,
// and no init() whose effect depends on the order of import paths
// (docs/decisions.md). bats/build.bats checks the built binaries.
func TestGoDefaults(t *testing.T) {
	root := "../../.."
	rules := []struct {
		name    string
		applies func(path string) bool
		bad     *regexp.Regexp
	}{
		{"a //go:debug directive", isGo, regexp.MustCompile(`(?m)^//go:debug `)},
		{"an init function", func(p string) bool { return isGo(p) && !strings.HasSuffix(p, "_test.go") },
			regexp.MustCompile(`(?m)^func init\(\)`)},
		{"a GOEXPERIMENT setting", func(p string) bool { return p == "Makefile" || strings.HasSuffix(p, ".mk") },
			regexp.MustCompile(`GOEXPERIMENT\s*[:?+]?=`)},
	}
	checked := 0
	err := walkProduct(root, func(path, rel string) error {
		for _, r := range rules {
			if !r.applies(rel) {
				continue
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			checked++
			if loc := r.bad.FindIndex(b); loc != nil {
				line := 1 + strings.Count(string(b[:loc[0]]), "\n")
				t.Errorf("%s:%d: %s; the product builds with Go's defaults (docs/decisions.md)", rel, line, r.name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked only %d files: is %s the top of the tree?", checked, root)
	}
}

func isGo(path string) bool { return strings.HasSuffix(path, ".go") }

// walkProduct calls fn for every file of the tree at root (path, and rel
// to root) but build outputs, hidden directories and the pinned tool
// modules, which are not the product.
func walkProduct(root string, fn func(path, rel string) error) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && rel != "." || rel == "bin" || rel == "build" || rel == "dist" || rel == "tools" {
				return filepath.SkipDir
			}
			return nil
		}
		return fn(path, rel)
	})
}

// Layers point down (CONVENTIONS.md): cmd → the programs (cmd/tool, the
// daemon in driver/) → lib. No package under lib/ imports driver/ or cmd/.
func TestLibImportsNoProgram(t *testing.T) {
	const module = "github.com/clusterrebootd/clusterrebootd/"
	checked := productImports(t, "../../..", "lib", func(rel, p string) {
		if strings.HasPrefix(p, module+"driver") || strings.HasPrefix(p, module+"cmd/") {
			t.Errorf("%s imports %s: a library must not import a program (move the code down, or the caller up)", rel, p)
		}
	})
	if checked < 50 {
		t.Fatalf("only %d files under lib/ checked", checked)
	}
}

// The daemon's two processes share only their contract: driver (the
// daemon) and driver/cluster (its child, crd-lock step) import
// driver/protocol and never each other, and driver/protocol imports
// neither, so that crd-lock links none of the daemon's code and the daemon
// none of the child's (tests included: a test in one of them that needs the
// other belongs in testscripts/).
func TestDaemonAndChildShareOnlyTheProtocol(t *testing.T) {
	const module = "github.com/clusterrebootd/clusterrebootd/"
	forbidden := map[string][]string{
		"driver/cluster/":  {module + "driver"},
		"driver/protocol/": {module + "driver", module + "driver/cluster"},
		"driver/":          {module + "driver/cluster"},
	}
	checked := 0
	err := walkProduct("../../../driver", func(path, _ string) error {
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		rel, _ := filepath.Rel("../../..", path)
		dir := filepath.Dir(rel) + "/"
		for _, imp := range f.Imports {
			p := strings.Trim(imp.Path.Value, `"`)
			for _, bad := range forbidden[dir] {
				if p == bad {
					t.Errorf("%s imports %s: the daemon and its child share only driver/protocol", rel, p)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 60 {
		t.Fatalf("checked only %d files under driver/", checked)
	}
}

// productImports calls fn with each import path of each Go file under
// root/under that is built into the product (not a _test.go file; rel is
// the file's path from root), and returns how many files it read.
func productImports(t *testing.T, root, under string, fn func(rel, imp string)) int {
	t.Helper()
	fset := token.NewFileSet()
	checked := 0
	err := walkProduct(filepath.Join(root, under), func(path, _ string) error {
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		rel, _ := filepath.Rel(root, path)
		for _, imp := range f.Imports {
			fn(rel, strings.Trim(imp.Path.Value, `"`))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return checked
}

// testOnly holds the test-support packages: lib/testonly/testsupport links
// testing and the etcd client, etcdtest starts an embedded etcd,
// monitortest Prometheus and Alertmanager, buildtest runs `go build`. No
// file built into the product (anything but a _test.go file) imports them,
// except their own and the benchmarks' (bench/, never shipped).
const testOnly = "lib/testonly/"

func TestTestOnlyPackagesStayInTests(t *testing.T) {
	const module = "github.com/clusterrebootd/clusterrebootd/"
	checked := productImports(t, "../../..", ".", func(rel, p string) {
		if strings.HasPrefix(p, module+testOnly) && !strings.HasPrefix(rel, testOnly) && !strings.HasPrefix(rel, "bench/") {
			t.Errorf("%s imports %s, a test-support package: only _test.go files (and bench/) may", rel, p)
		}
	})
	if checked < 100 {
		t.Fatalf("checked only %d files: is the test run from lib/testonly/buildtest?", checked)
	}
}
