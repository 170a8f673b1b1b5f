package metrale_test

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"metrale.dev/metrale"
)

// Sites read as the path relative to the module root, in every record.
func TestSitesAreRelativeToTheModuleRoot(t *testing.T) {
	ctx := testContext(t, 0)
	_, line := thisLine()
	_, _ = ctx.Kernel("no_such_module", "f") // line + 1
	audit, err := ctx.KernelAudit()
	if err != nil || len(audit) == 0 {
		t.Fatalf("KernelAudit: %v %v", audit, err)
	}
	last := audit[len(audit)-1]
	if last.File != "site_test.go" || last.Line != line+1 {
		t.Errorf("kernel audit site %s:%d, want site_test.go:%d", last.File, last.Line, line+1)
	}
	if f, l := metrale.Site(0); f != "site_test.go" || l != line+10 {
		t.Errorf("Site(0) = %s:%d, want site_test.go:%d", f, l, line+10)
	}
	if f, l := metrale.Site(-3); f != "site_test.go" || l != line+13 {
		t.Errorf("Site(-3) = %s:%d, want site_test.go:%d", f, l, line+13)
	}
	if f, l := metrale.Site(1000); f != "?" || l != 0 {
		t.Errorf("Site past the stack = %s:%d", f, l)
	}
}

func TestSiteFileForms(t *testing.T) {
	if gomod, err := os.ReadFile("go.mod"); err != nil || !strings.HasPrefix(string(gomod), "module "+metrale.OwnModule+"\n") {
		t.Errorf("go.mod does not declare module %s (%v)", metrale.OwnModule, err)
	}
	_, self, _, _ := runtime.Caller(0)
	root := filepath.Dir(self)
	outside := filepath.Join(t.TempDir(), "a", "b.go") // no go.mod above a temp dir
	if err := os.MkdirAll(filepath.Dir(outside), 0o755); err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		self: "site_test.go",
		filepath.Join(root, "examples/tour/main.go"): "examples/tour/main.go",
		outside:                            outside,        // no module: kept as recorded
		"metrale.dev/metrale/site_test.go": "site_test.go", // -trimpath, this module's tests
	} {
		if got := metrale.SiteFile(in); got != want {
			t.Errorf("siteFile(%q) = %q, want %q", in, got, want)
		}
	}
	// -trimpath: "module/file" for the main module, "module@version/file"
	// for the others; the longest module path that prefixes the file wins.
	mods := func() []string { return []string{"example.com/app", "example.com/app/sub", "metrale.dev/metrale"} }
	for in, want := range map[string]string{
		"example.com/app/cmd/main.go":          "cmd/main.go",
		"example.com/app/sub/x.go":             "x.go",
		"metrale.dev/metrale@v0.2.0/buffer.go": "buffer.go",
		"example.com/application/x.go":         "example.com/application/x.go", // not a path boundary
		"unknown.example/mod@v1.2.3/pkg/f.go":  "unknown.example/mod@v1.2.3/pkg/f.go",
	} {
		if got := metrale.SiteFileIn(in, mods); got != want {
			t.Errorf("siteFileIn(%q) = %q, want %q", in, got, want)
		}
	}
}
