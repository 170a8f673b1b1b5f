package metrale_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"metrale.dev/metrale"
)

// buildSnippet type-checks a main package using this module (go vet does
// the type check without linking) and returns the toolchain's output.
func buildSnippet(t *testing.T, body string) (string, error) {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gomod := "module snippet\n\ngo 1.19\n\nrequire metrale.dev/metrale v0.0.0\n\nreplace metrale.dev/metrale => " + here + "\n"
	src := "package main\n\nimport \"metrale.dev/metrale\"\n\nfunc main() {\n\tvar b *metrale.Buffer\n" + body + "\n}\n"
	for name, text := range map[string]string{"go.mod": gomod, "main.go": src} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "vet", ".")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Upload and Download take plain numbers only: slices of pointers or
// strings (Go pointers, against cgo's rules) do not compile.
func TestUploadRejectsPointerElementsAtCompileTime(t *testing.T) {
	if out, err := buildSnippet(t, "\t_ = metrale.Upload(b, []float32{1})\n\ttype celsius float64\n\t_ = metrale.Download(b, []celsius{1})"); err != nil {
		t.Fatalf("the control snippet does not build: %v\n%s", err, out)
	}
	for _, body := range []string{
		"\tx := 1\n\t_ = metrale.Upload(b, []*int{&x})",
		"\t_ = metrale.Download(b, []string{\"a\"})",
		"\t_ = metrale.Upload(b, []struct{ P *int }{{}})",
		"\t_ = metrale.Download(b, [][]byte{nil})",
	} {
		out, err := buildSnippet(t, body)
		if err == nil {
			t.Errorf("compiled, want a type error:\n%s", body)
		} else if !strings.Contains(out, "Numeric") {
			t.Errorf("failed for another reason than the Numeric constraint:\n%s\n%s", body, out)
		}
	}
}

// Counters has one field per counter of metrale_counters_t.
func TestCountersMatchTheCStruct(t *testing.T) {
	ct := reflect.TypeOf(metrale.Counters{})
	if ct.NumField() != metrale.CountersCWords() {
		t.Fatalf("Counters has %d fields, metrale_counters_t %d counters", ct.NumField(), metrale.CountersCWords())
	}
	for i := 0; i < ct.NumField(); i++ {
		if ct.Field(i).Type.Kind() != reflect.Uint64 {
			t.Errorf("Counters.%s is %v", ct.Field(i).Name, ct.Field(i).Type)
		}
	}
}
