package metrale

/*
#include <stdlib.h>
*/
import "C"

import (
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
)

// Call sites go on the ledger, the kernel audit and the quarantine in one
// format for every binding: the source path relative to the root of the
// project the build tool compiled, then the line. For Go that root is the
// module's (the directory holding go.mod), so a site reads
// "examples/tour/main.go:42", as Rust's file!() reads "src/main.rs" for a
// crate. runtime.Caller gives absolute paths (or, under -trimpath,
// "module/path"), so siteFile rewrites them.

// moduleRoots caches, per source directory, the module root found above it
// ("" when none): one walk per directory, then a map read.
var moduleRoots sync.Map // string -> string

// moduleRootOf is the nearest directory at or above dir holding go.mod.
func moduleRootOf(dir string) string {
	if v, ok := moduleRoots.Load(dir); ok {
		return v.(string)
	}
	root := ""
	for d := dir; ; {
		if st, err := os.Stat(filepath.Join(d, "go.mod")); err == nil && !st.IsDir() {
			root = d
			break
		}
		parent := filepath.Dir(d)
		if parent == d {
			break
		}
		d = parent
	}
	moduleRoots.Store(dir, root)
	return root
}

// trimpathModules are the module paths of the running binary, longest
// for sites recorded under -trimpath ("module@version/file.go"); the
// longest that prefixes a file wins.
var (
	trimpathOnce sync.Once
	trimpathMods []string
)

// ownModule is this binding's module path: test binaries carry no main
// module in their build info, so this module's own tests need it.
const ownModule = "metrale.dev/metrale"

func trimpathModules() []string {
	trimpathOnce.Do(func() {
		trimpathMods = append(trimpathMods, ownModule)
		if bi, ok := debug.ReadBuildInfo(); ok {
			trimpathMods = append(trimpathMods, bi.Main.Path)
			for _, d := range bi.Deps {
				trimpathMods = append(trimpathMods, d.Path)
			}
		}
	})
	return trimpathMods
}

// siteFile is file in the shared site format: relative to its module's
// root where that root can be found, else as the toolchain recorded it
// (a binary moved away from its sources keeps absolute paths: build it
// with -trimpath, and the module paths in its build info give the root).
func siteFile(file string) string { return siteFileIn(file, trimpathModules) }

// siteFileIn is siteFile with the binary's module paths given by mods
// (test binaries carry none).
func siteFileIn(file string, mods func() []string) string {
	if filepath.IsAbs(file) {
		if root := moduleRootOf(filepath.Dir(file)); root != "" {
			if rel, err := filepath.Rel(root, file); err == nil && !strings.HasPrefix(rel, "..") {
				return filepath.ToSlash(rel)
			}
		}
		return file
	}
	best := ""
	for _, m := range mods() {
		if m != "" && len(m) > len(best) && strings.HasPrefix(file, m) {
			rest := file[len(m):]
			if strings.HasPrefix(rest, "/") || strings.HasPrefix(rest, "@") {
				best = m
			}
		}
	}
	if best == "" {
		return file
	}
	rest := file[len(best):]
	if strings.HasPrefix(rest, "@") { // module@version/file.go
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			rest = rest[i:]
		}
	}
	return strings.TrimPrefix(rest, "/")
}

// Site returns the call site `skip` frames above Site's caller in the
// shared site format ("dir/file.go", line), for helpers that allocate on
// their caller's behalf (file, line := metrale.Site(1); ctx.AllocAt(n,
// file, line)). ("?", 0) when the stack is not that deep; a negative skip
// counts as 0.
func Site(skip int) (file string, line int) {
	if skip < 0 { // never this package's own frames
		skip = 0
	}
	_, f, l, ok := runtime.Caller(skip + 1)
	if !ok {
		return "?", 0
	}
	return siteFile(f), l
}

// callerSite is Site as a C string (the caller frees it with freeC).
func callerSite(skip int) (*C.char, C.int) {
	file, line := Site(skip + 1)
	return C.CString(file), C.int(line)
}
