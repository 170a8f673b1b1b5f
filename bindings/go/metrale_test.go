package metrale_test

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"metrale.dev/metrale"
	"metrale.dev/metrale/internal/testkernels"
)

// testBackend is the backend METRALE_BACKEND asks for: host when unset.
func testBackend(t *testing.T) metrale.Backend {
	switch v := os.Getenv("METRALE_BACKEND"); v {
	case "", "host":
		return metrale.BackendHost
	case "cuda":
		return metrale.BackendCUDA
	case "auto":
		return metrale.BackendAuto
	default:
		t.Fatalf("METRALE_BACKEND=%s: expected host, cuda or auto", v)
	}
	return metrale.BackendHost
}

// testContext opens a context on the chosen backend with module
// "test_kernels" ready: C host kernels on host, the fatbin named by
// METRALE_TEST_KERNELS on cuda. Tests must not assume fresh device memory is
// zero, nor that a device pointer is a host address.
func testContext(t *testing.T, redzone uint64) *metrale.Context {
	t.Helper()
	o := metrale.DefaultOptions()
	o.Backend = testBackend(t)
	o.RedzoneBytes = redzone
	ctx, err := metrale.NewContext(&o)
	if err != nil {
		t.Fatalf("NewContext on the %v backend: %v", o.Backend, err)
	}
	t.Cleanup(func() { ctx.Close() })
	if ctx.Backend() != metrale.BackendHost {
		path := os.Getenv("METRALE_TEST_KERNELS")
		if path == "" {
			t.Fatalf("METRALE_TEST_KERNELS must name test_kernels.fatbin on the %v backend", ctx.Backend())
		}
		if err := ctx.LoadModuleFile("test_kernels", path); err != nil {
			t.Fatalf("loading %s: %v", path, err)
		}
		return ctx
	}
	for _, k := range []struct {
		name  string
		fn    unsafe.Pointer
		sizes []uint64
	}{
		{"fill_u32", testkernels.FillU32(), testkernels.FillU32Sizes},
		{"overflow_write", testkernels.OverflowWrite(), testkernels.OverflowWriteSizes},
		{"mixed_params", testkernels.MixedParams(), testkernels.MixedParamsSizes},
	} {
		if err := ctx.RegisterHostKernel("test_kernels", k.name, k.fn, k.sizes); err != nil {
			t.Fatal(err)
		}
	}
	return ctx
}

func thisLine() (string, int) {
	_, file, line, _ := runtime.Caller(1)
	return file, line
}

func TestLedgerNamesTheCallersLine(t *testing.T) {
	ctx := testContext(t, 0)
	_, line := thisLine()
	buf, err := ctx.Alloc(400) // must be the line after thisLine()
	// Sites are relative to the module root (bindings/go), as Rust's file!().
	const file = "metrale_test.go"
	if err != nil {
		t.Fatal(err)
	}
	live, err := ctx.LiveAllocations()
	if err != nil || len(live) != 1 {
		t.Fatalf("LiveAllocations: %v %v", live, err)
	}
	if live[0].File != file || live[0].Line != line+1 || live[0].Bytes != 400 || live[0].Ptr != buf.Ptr() {
		t.Fatalf("site %s:%d, want %s:%d", live[0].File, live[0].Line, file, line+1)
	}
	report, err := ctx.AllocReport(0, 0)
	if err != nil || !strings.Contains(report, "metrale_test.go") {
		t.Fatalf("AllocReport: %q %v", report, err)
	}
	if err := buf.Close(); err != nil {
		t.Fatal(err)
	}
	if n, _ := ctx.LiveCount(); n != 0 {
		t.Fatalf("LiveCount %d after Close", n)
	}
}

func TestCopiesAndLaunch(t *testing.T) {
	ctx := testContext(t, 0)
	buf, err := ctx.Alloc(64 * 4)
	if err != nil {
		t.Fatal(err)
	}
	k, err := ctx.Kernel("test_kernels", "fill_u32")
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Launch(metrale.LaunchConfig{Grid: metrale.D1(1), Block: metrale.D1(64)}, buf, uint32(7), uint64(64)); err != nil {
		t.Fatal(err)
	}
	got := make([]uint32, 64)
	if err := metrale.Download(buf, got); err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		if v != 7 {
			t.Fatalf("got[%d] = %d", i, v)
		}
	}
	other, _ := ctx.Alloc(64 * 4)
	if err := other.CopyFrom(buf); err != nil {
		t.Fatal(err)
	}
	if err := metrale.Upload(other, []uint32{1, 2}); err != nil {
		t.Fatal(err)
	}
	if err := metrale.Download(other, got); err != nil || got[0] != 1 || got[1] != 2 || got[2] != 7 {
		t.Fatalf("after Upload: %v %v", got[:3], err)
	}
}

func TestPackedLayoutMatchesTheKernel(t *testing.T) {
	ctx := testContext(t, 0)
	out, _ := ctx.Alloc(7 * 8)
	args := []interface{}{uint8(0xAB), uint16(0xBEEF), uint32(0xDEADBEEF), uint64(math.MaxUint64 - 1), float32(1.5), -2.25, int8(-7), out}
	packed, err := metrale.PackArgs(args...)
	if err != nil || len(packed) != 48 {
		t.Fatalf("PackArgs: %d bytes, %v", len(packed), err)
	}
	if binary.LittleEndian.Uint32(packed[16:]) != math.Float32bits(1.5) || packed[32] != 0xF9 {
		t.Fatalf("layout: %x", packed)
	}
	k, _ := ctx.Kernel("test_kernels", "mixed_params")
	if err := k.Launch(metrale.LaunchConfig{Grid: metrale.D1(1), Block: metrale.D1(1)}, args...); err != nil {
		t.Fatal(err)
	}
	got := make([]uint64, 7)
	_ = metrale.Download(out, got)
	neg7 := int64(-7)
	want := []uint64{0xAB, 0xBEEF, 0xDEADBEEF, math.MaxUint64 - 1, math.Float64bits(1.5), math.Float64bits(-2.25), uint64(neg7)}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("out[%d] = %#x, want %#x", i, got[i], want[i])
		}
	}
}

func TestWrongArgumentSizesAreErrors(t *testing.T) {
	ctx := testContext(t, 0)
	buf, _ := ctx.Alloc(16)
	k, _ := ctx.Kernel("test_kernels", "fill_u32")
	cfg := metrale.LaunchConfig{Grid: metrale.D1(1), Block: metrale.D1(1)}
	for name, err := range map[string]error{
		"one arg too many": k.Launch(cfg, buf, uint32(1), uint64(4), uint64(0)),
		"missing args":     k.Launch(cfg, buf),
		"unsupported type": k.Launch(cfg, buf, "seven", uint64(4)),
		"zero grid":        k.Launch(metrale.LaunchConfig{Block: metrale.D1(1)}, buf, uint32(1), uint64(4)),
		"copy too long":    buf.CopyFromHost(make([]byte, 17)),
		"read too long":    buf.CopyToHost(make([]byte, 17)),
	} {
		if !errors.Is(err, metrale.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
}

func TestNullishValuesAreErrors(t *testing.T) {
	ctx := testContext(t, 0)
	if _, err := ctx.Alloc(0); !errors.Is(err, metrale.ErrInvalidArgument) {
		t.Errorf("Alloc(0): %v", err)
	}
	_, err := ctx.Kernel("no_such_module", "f")
	if !errors.Is(err, metrale.ErrNotFound) {
		t.Errorf("Kernel: %v", err)
	}
	var me *metrale.Error
	if !errors.As(err, &me) || me.Message == "" || !strings.Contains(err.Error(), "METRALE_ERROR_NOT_FOUND") {
		t.Errorf("the message travels with the status: %#v", err)
	}
	if err := ctx.RegisterHostKernel("m", "f", nil, nil); !errors.Is(err, metrale.ErrInvalidArgument) {
		t.Errorf("RegisterHostKernel(nil): %v", err)
	}
	var nilCtx *metrale.Context
	if _, err := nilCtx.Alloc(8); !errors.Is(err, metrale.ErrClosed) {
		t.Errorf("nil context: %v", err)
	}
	var nilStream *metrale.Stream
	if err := nilStream.Synchronize(); err == nil {
		t.Error("nil stream synchronized")
	}
	if err := (*metrale.Buffer)(nil).Close(); err != nil {
		t.Errorf("nil buffer Close: %v", err)
	}
	def, _ := ctx.DefaultStream()
	if err := def.Close(); err != nil {
		t.Errorf("default stream Close: %v", err)
	}
	if ctx.HasModule("no_such_module") {
		t.Error("HasModule")
	}
}

func TestDoubleCloseAndUseAfterClose(t *testing.T) {
	ctx := testContext(t, 0)
	buf, _ := ctx.Alloc(16)
	s, _ := ctx.NewStream()
	e, _ := ctx.NewEvent(true)
	k, _ := ctx.Kernel("test_kernels", "fill_u32")
	for i := 0; i < 2; i++ {
		if err := buf.Close(); err != nil {
			t.Fatalf("buf.Close #%d: %v", i, err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("s.Close #%d: %v", i, err)
		}
		if err := e.Close(); err != nil {
			t.Fatalf("e.Close #%d: %v", i, err)
		}
	}
	if err := buf.CopyFromHost([]byte{1}); !errors.Is(err, metrale.ErrClosed) || !errors.Is(err, metrale.ErrInvalidArgument) {
		t.Errorf("buffer after Close: %v", err)
	}
	if err := s.Synchronize(); !errors.Is(err, metrale.ErrClosed) {
		t.Errorf("stream after Close: %v", err)
	}
	if _, err := e.Query(); !errors.Is(err, metrale.ErrClosed) {
		t.Errorf("event after Close: %v", err)
	}
	if err := k.Launch(metrale.LaunchConfig{Grid: metrale.D1(1), Block: metrale.D1(1)}, buf, uint32(1), uint64(4)); !errors.Is(err, metrale.ErrInvalidArgument) {
		t.Errorf("launch with a closed buffer: %v", err)
	}

	live, _ := ctx.Alloc(16)
	if err := ctx.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ctx.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := live.Memset(0); !errors.Is(err, metrale.ErrClosed) {
		t.Errorf("buffer after context Close: %v", err)
	}
	if err := live.Close(); err != nil {
		t.Errorf("buffer Close after context Close: %v", err)
	}
	if _, err := ctx.Alloc(8); !errors.Is(err, metrale.ErrClosed) {
		t.Errorf("Alloc after Close: %v", err)
	}
	if err := k.Launch(metrale.LaunchConfig{Grid: metrale.D1(1), Block: metrale.D1(1)}, uint64(0), uint32(1), uint64(0)); !errors.Is(err, metrale.ErrClosed) {
		t.Errorf("kernel after context Close: %v", err)
	}
}

func TestGraphCaptureAndReplay(t *testing.T) {
	ctx := testContext(t, 0)
	buf, _ := ctx.Alloc(32 * 4)
	k, _ := ctx.Kernel("test_kernels", "fill_u32")
	s, _ := ctx.NewStream()
	defer s.Close()
	if err := s.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	if err := k.Launch(metrale.LaunchConfig{Grid: metrale.D1(1), Block: metrale.D1(32), Stream: s}, buf, uint32(5), uint64(32)); err != nil {
		t.Fatal(err)
	}
	g, err := s.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := g.Launch(s); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	got := make([]uint32, 32)
	_ = metrale.Download(buf, got)
	if got[31] != 5 {
		t.Fatalf("replay did not run: %v", got)
	}
	if _, err := s.EndCapture(); !errors.Is(err, metrale.ErrCapture) {
		t.Fatalf("EndCapture without capture: %v", err)
	}
}

func TestRedzoneOverflowIsReported(t *testing.T) {
	ctx := testContext(t, 64)
	buf, _ := ctx.Alloc(32)
	_, line := thisLine()
	over, _ := ctx.Alloc(32)
	k, _ := ctx.Kernel("test_kernels", "fill_u32")
	// fill_u32 with n = 10 writes 40 bytes into a 32-byte buffer.
	if err := k.Launch(metrale.LaunchConfig{Grid: metrale.D1(1), Block: metrale.D1(1)}, over, uint32(0x11111111), uint64(10)); err != nil {
		t.Fatal(err)
	}
	if err := ctx.Synchronize(); err != nil {
		t.Fatal(err)
	}
	v, err := ctx.RedzoneScan()
	if err != nil || len(v) != 1 {
		t.Fatalf("RedzoneScan: %v %v", v, err)
	}
	if v[0].Ptr != over.Ptr() || v[0].Line != line+1 || v[0].BadBytes != 8 || v[0].Expected != 0xA5 || v[0].Found != 0x11 {
		t.Fatalf("violation %+v", v[0])
	}
	_ = buf
}

func TestRedzoneOverflowFromOverflowWrite(t *testing.T) {
	ctx := testContext(t, 64)
	_, line := thisLine()
	buf, _ := ctx.Alloc(32)
	k, err := ctx.Kernel("test_kernels", "overflow_write")
	if err != nil {
		t.Fatal(err)
	}
	// The planted bug: 5 bytes past the end, into the pad.
	if err := k.Launch(metrale.LaunchConfig{Grid: metrale.D1(1), Block: metrale.D1(64)}, buf, uint64(32), uint64(5), uint32(0x22)); err != nil {
		t.Fatal(err)
	}
	if err := ctx.Synchronize(); err != nil {
		t.Fatal(err)
	}
	v, err := ctx.RedzoneScan()
	if err != nil || len(v) != 1 {
		t.Fatalf("RedzoneScan: %v %v", v, err)
	}
	if v[0].Ptr != buf.Ptr() || v[0].Line != line+1 || v[0].FirstBadOffset != 0 || v[0].BadBytes != 5 || v[0].Found != 0x22 {
		t.Fatalf("violation %+v", v[0])
	}
}

// Registration itself: C functions under a second module name.
func TestHostKernelsRegisterUnderTheirModule(t *testing.T) {
	ctx := testContext(t, 0)
	if ctx.Backend() != metrale.BackendHost {
		t.Skipf("skipped on %v: host kernels are registered C functions; a %v context loads device code", ctx.Backend(), ctx.Backend())
	}
	if err := ctx.RegisterHostKernel("mine", "fill", testkernels.FillU32(), testkernels.FillU32Sizes); err != nil {
		t.Fatal(err)
	}
	if !ctx.HasModule("mine") {
		t.Fatal("HasModule(mine) after RegisterHostKernel")
	}
	buf, _ := ctx.Alloc(8 * 4)
	k, err := ctx.Kernel("mine", "fill")
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Launch(metrale.LaunchConfig{Grid: metrale.D1(1), Block: metrale.D1(1)}, buf, uint32(3), uint64(8)); err != nil {
		t.Fatal(err)
	}
	got := make([]uint32, 8)
	if err := metrale.Download(buf, got); err != nil || got[7] != 3 {
		t.Fatalf("after the launch: %v %v", got, err)
	}
}

func TestLogCallbackRunsGoCode(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	metrale.SetLogCallback(func(level metrale.LogLevel, msg string) {
		mu.Lock()
		lines = append(lines, msg)
		mu.Unlock()
	})
	defer metrale.SetLogCallback(nil)
	ctx := testContext(t, 0)
	if _, err := ctx.Alloc(8); err != nil {
		t.Fatal(err)
	}
	// The destroy frees the Buffer left open and names its site.
	if err := ctx.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	found := false
	for _, l := range lines {
		found = found || strings.Contains(l, "metrale_test.go")
	}
	if !found {
		t.Fatalf("no log line named the site: %q", lines)
	}
}

func TestConcurrentErrorsKeepTheirMessages(t *testing.T) {
	ctx := testContext(t, 0)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				_, err := ctx.Kernel("missing_module", "f")
				var me *metrale.Error
				if !errors.As(err, &me) || me.Status != metrale.ErrNotFound || !strings.Contains(me.Message, "missing_module") {
					t.Errorf("goroutine %d: %v", g, err)
					return
				}
				runtime.Gosched()
			}
		}(g)
	}
	wg.Wait()
}
