package metrale_test

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"metrale.dev/metrale"
)

// logCapture collects the log lines (library and binding) while a test runs.
type logCapture struct {
	mu    sync.Mutex
	lines []string
}

func captureLogs(t *testing.T) *logCapture {
	c := &logCapture{}
	metrale.SetLogCallback(func(_ metrale.LogLevel, msg string) {
		c.mu.Lock()
		c.lines = append(c.lines, msg)
		c.mu.Unlock()
	})
	t.Cleanup(func() { metrale.SetLogCallback(nil) })
	return c
}

// waitFor runs the collector until cond holds (finalizers run on their own
// goroutine, after a GC cycle) or about two seconds passed.
func (c *logCapture) waitFor(cond func(lines []string) bool) []string {
	for i := 0; i < 200; i++ {
		runtime.GC()
		c.mu.Lock()
		lines := append([]string(nil), c.lines...)
		c.mu.Unlock()
		if cond(lines) {
			return lines
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.lines...)
}

func has(lines []string, parts ...string) bool {
	for _, l := range lines {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			return true
		}
	}
	return false
}

// leak makes handles and drops them, returning the line that allocated the
// buffer; noinline keeps them off the caller's frame.
//
//go:noinline
func leak(t *testing.T, ctx *metrale.Context) (bufLine, streamLine int) {
	_, bufLine = thisLine()
	if _, err := ctx.Alloc(48); err != nil { // bufLine + 1
		t.Fatal(err)
	}
	_, streamLine = thisLine()
	if _, err := ctx.NewStream(); err != nil { // streamLine + 1
		t.Fatal(err)
	}
	if _, err := ctx.NewEvent(false); err != nil {
		t.Fatal(err)
	}
	return bufLine + 1, streamLine + 1
}

func TestFinalizersFreeUnclosedHandlesAndNameTheirSites(t *testing.T) {
	logs := captureLogs(t)
	ctx := testContext(t, 0)
	bufLine, streamLine := leak(t, ctx)
	bufSite := fmt.Sprintf("finalizer_test.go:%d", bufLine)
	streamSite := fmt.Sprintf("finalizer_test.go:%d", streamLine)
	lines := logs.waitFor(func(l []string) bool {
		return has(l, "Buffer of 48 bytes", bufSite, "freed it") && has(l, "a Stream", streamSite, "destroyed it") &&
			has(l, "an Event", "destroyed it")
	})
	for _, want := range [][]string{{"Buffer of 48 bytes", bufSite, "never closed", "freed it"},
		{"a Stream", streamSite, "never closed", "destroyed it"}, {"an Event", "never closed", "destroyed it"}} {
		if !has(lines, want...) {
			t.Errorf("no log line with %q in %q", want, lines)
		}
	}
	if n, err := ctx.LiveCount(); err != nil || n != 0 {
		t.Errorf("LiveCount %d %v after the finalizer: the buffer was not freed", n, err)
	}
}

// makeContext opens a context and drops it.
//
//go:noinline
func makeContext(t *testing.T) int {
	o := metrale.DefaultOptions()
	o.Backend = testBackend(t)
	_, line := thisLine()
	if _, err := metrale.NewContext(&o); err != nil { // line + 1
		t.Fatal(err)
	}
	return line + 1
}

func TestFinalizerDestroysAnUnclosedContext(t *testing.T) {
	logs := captureLogs(t)
	site := fmt.Sprintf("finalizer_test.go:%d", makeContext(t))
	lines := logs.waitFor(func(l []string) bool { return has(l, "a Context", site, "destroyed it") })
	if !has(lines, "a Context", site, "never closed", "destroyed it") {
		t.Errorf("no log line for the context made at %s: %q", site, lines)
	}
}

// captureInto records a launch that writes buf into a graph and drops buf.
//
//go:noinline
func captureInto(t *testing.T, ctx *metrale.Context, s *metrale.Stream) *metrale.Graph {
	buf, err := ctx.Alloc(16 * 4)
	if err != nil {
		t.Fatal(err)
	}
	k, _ := ctx.Kernel("test_kernels", "fill_u32")
	if err := s.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	if err := k.Launch(metrale.LaunchConfig{Grid: metrale.D1(1), Block: metrale.D1(16), Stream: s}, buf, uint32(9), uint64(16)); err != nil {
		t.Fatal(err)
	}
	g, err := s.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// A graph keeps the buffers its capture used: no finalizer frees them while
// it may replay; once it is closed, they are collectable again.
func TestGraphKeepsCapturedBuffersAlive(t *testing.T) {
	logs := captureLogs(t)
	ctx := testContext(t, 0)
	s, _ := ctx.NewStream()
	defer s.Close()
	g := captureInto(t, ctx, s)
	for i := 0; i < 5; i++ {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
	if n, _ := ctx.LiveCount(); n != 1 {
		t.Fatalf("LiveCount %d while the graph holds the buffer", n)
	}
	if err := g.Launch(s); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	g.Close()
	lines := logs.waitFor(func(l []string) bool { return has(l, "Buffer of 64 bytes", "freed it") })
	if !has(lines, "Buffer of 64 bytes", "freed it") {
		t.Errorf("the buffer was not finalized after the graph closed: %q", lines)
	}
	if n, _ := ctx.LiveCount(); n != 0 {
		t.Errorf("LiveCount %d after the graph closed", n)
	}
}

//go:noinline
func leakBuffer(t *testing.T, ctx *metrale.Context) {
	if _, err := ctx.Alloc(24); err != nil {
		t.Fatal(err)
	}
}

// While a stream captures, a finalizer cannot wait for it: it leaves the
// memory to the context and says so, rather than free what may be in use.
func TestFinalizerLeavesMemoryWhileAStreamCaptures(t *testing.T) {
	logs := captureLogs(t)
	ctx := testContext(t, 0)
	s, _ := ctx.NewStream()
	defer s.Close()
	if err := s.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	leakBuffer(t, ctx)
	lines := logs.waitFor(func(l []string) bool { return has(l, "Buffer of 24 bytes") })
	if !has(lines, "Buffer of 24 bytes", "not freed") {
		t.Errorf("want a 'not freed' line: %q", lines)
	}
	if n, _ := ctx.LiveCount(); n != 1 {
		t.Errorf("LiveCount %d: the finalizer freed memory while a stream captured", n)
	}
	if err := s.AbortCapture(); err != nil {
		t.Fatal(err)
	}
}

// A handle closed by hand has no finalizer left: nothing is logged.
func TestClosedHandlesAreNotReportedAsLeaks(t *testing.T) {
	logs := captureLogs(t)
	ctx := testContext(t, 0)
	func() {
		b, _ := ctx.Alloc(4040)
		b.Close()
		s, _ := ctx.NewStream()
		s.Close()
	}()
	leakBuffer(t, ctx) // the marker: once it is reported, the others would be too
	lines := logs.waitFor(func(l []string) bool { return has(l, "Buffer of 24 bytes") })
	if has(lines, "Buffer of 4040 bytes") || has(lines, "a Stream") {
		t.Errorf("a closed handle was reported: %q", lines)
	}
}
