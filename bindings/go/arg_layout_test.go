package metrale_test

// The packing rule through a kernel that writes back what it received: C
// host kernels (internal/testkernels/layout.go) on the host backend, the
// same names from tests/kernels/test_kernels.cu on cuda. A launch packed at
// other offsets than the kernel reads turns these red, or is refused.

import (
	"errors"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"metrale.dev/metrale"
	"metrale.dev/metrale/internal/testkernels"
)

// sv mirrors struct { uint16_t a; uint8_t b[2]; float c; }: 8 bytes, aligned to 4.
type sv struct {
	A uint16
	B [2]uint8
	C float32
}

// layoutContext is a context whose module "test_kernels" has the layout
// kernels: registered with their alignments on host, the fatbin on cuda.
func layoutContext(t *testing.T) *metrale.Context {
	t.Helper()
	o := metrale.DefaultOptions()
	o.Backend = metrale.BackendHost
	if os.Getenv("METRALE_BACKEND") == "cuda" {
		o.Backend = metrale.BackendCUDA
	}
	ctx, err := metrale.NewContext(&o)
	if err != nil {
		t.Fatalf("NewContext: %v", err)
	}
	t.Cleanup(func() { ctx.Close() })
	if ctx.Backend() != metrale.BackendHost {
		path := os.Getenv("METRALE_TEST_KERNELS")
		if path == "" {
			t.Fatalf("METRALE_TEST_KERNELS must name test_kernels.fatbin on the %v backend", ctx.Backend())
		}
		if err := ctx.LoadModuleFile("test_kernels", path); err != nil {
			t.Fatal(err)
		}
		return ctx
	}
	var out *metrale.Buffer // only its type matters to ParamsOf
	for _, k := range []struct {
		name   string
		fn     unsafe.Pointer
		sample []interface{}
	}{
		{"layout_u8_u16x2_u64", testkernels.LayoutU8U16x2U64(), []interface{}{uint8(0), [2]uint16{}, uint64(0), out}},
		{"layout_six", testkernels.LayoutSix(), []interface{}{int8(0), float64(0), int16(0), uintptr(0), int64(0), float32(0), out}},
		{"layout_struct", testkernels.LayoutStruct(), []interface{}{uint8(0), sv{}, out}},
	} {
		params, err := metrale.ParamsOf(k.sample...)
		if err != nil {
			t.Fatal(err)
		}
		if err := ctx.RegisterHostKernelLayout("test_kernels", k.name, k.fn, params); err != nil {
			t.Fatal(err)
		}
	}
	return ctx
}

// launchAndRead launches name with args (the last one out) and returns out.
func launchAndRead(t *testing.T, ctx *metrale.Context, name string, out *metrale.Buffer, wantOffsets []uint64, args ...interface{}) []uint64 {
	t.Helper()
	p, err := metrale.Pack(args...)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p.Offsets, wantOffsets) {
		t.Fatalf("%s: offsets %v, want %v", name, p.Offsets, wantOffsets)
	}
	k, err := ctx.Kernel("test_kernels", name)
	if err != nil {
		t.Fatal(err)
	}
	if err := metrale.Upload(out, make([]uint64, 6)); err != nil {
		t.Fatal(err)
	}
	cfg := metrale.LaunchConfig{Grid: metrale.D1(1), Block: metrale.D1(1)}
	if err := k.Launch(cfg, args...); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	got := make([]uint64, 6)
	if err := metrale.Download(out, got); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestArgLayoutU8U16x2U64(t *testing.T) {
	ctx := layoutContext(t)
	out, _ := ctx.Alloc(6 * 8)
	defer out.Close()
	got := launchAndRead(t, ctx, "layout_u8_u16x2_u64", out, []uint64{0, 2, 8, 16},
		uint8(0xAB), [2]uint16{0x1234, 0xBEEF}, uint64(0x0102030405060708), out)
	want := []uint64{0xAB, 0x1234, 0xBEEF, 0x0102030405060708}
	if !reflect.DeepEqual(got[:4], want) {
		t.Fatalf("the kernel got %#x, want %#x", got[:4], want)
	}
}

func TestArgLayoutSixScalars(t *testing.T) {
	ctx := layoutContext(t)
	out, _ := ctx.Alloc(6 * 8)
	defer out.Close()
	ll := int64(-0x0123456789ABCDEF)
	got := launchAndRead(t, ctx, "layout_six", out, []uint64{0, 8, 16, 24, 32, 40, 48},
		int8('Z'), -2.5e300, int16(-1234), uintptr(0x1122334455667788), ll, float32(3.25), out)
	neg := int64(-1234)
	want := []uint64{'Z', math.Float64bits(-2.5e300), uint64(neg), 0x1122334455667788, uint64(ll), uint64(math.Float32bits(3.25))}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("the kernel got %#x, want %#x", got, want)
	}
}

func TestArgLayoutStructByValue(t *testing.T) {
	ctx := layoutContext(t)
	out, _ := ctx.Alloc(6 * 8)
	defer out.Close()
	got := launchAndRead(t, ctx, "layout_struct", out, []uint64{0, 4, 16},
		uint8(0x7E), sv{0xCAFE, [2]uint8{0x11, 0x22}, -0.75}, out)
	want := []uint64{0x7E, 0xCAFE, 0x11, 0x22, uint64(math.Float32bits(-0.75))}
	if !reflect.DeepEqual(got[:5], want) {
		t.Fatalf("the kernel got %#x, want %#x", got[:5], want)
	}
}

// A uint32 where the kernel takes uint16_t[2] lands at offset 4, not 2:
// refused, naming the parameter, and nothing runs.
func TestArgLayoutOtherOffsetsAreRefused(t *testing.T) {
	ctx := layoutContext(t)
	k, _ := ctx.Kernel("test_kernels", "layout_u8_u16x2_u64")
	offsets, sizes, err := k.ParamLayout()
	if errors.Is(err, metrale.ErrUnsupported) && ctx.Backend() != metrale.BackendHost {
		t.Skipf("the driver has no cuFuncGetParamInfo: %v", err)
	}
	if err != nil || !reflect.DeepEqual(offsets, []uint64{0, 2, 8, 16}) || !reflect.DeepEqual(sizes, []uint64{1, 4, 8, 8}) {
		t.Fatalf("ParamLayout: %v %v %v", offsets, sizes, err)
	}
	out, _ := ctx.Alloc(6 * 8)
	defer out.Close()
	_ = metrale.Upload(out, []uint64{7, 7, 7, 7, 7, 7})
	err = k.Launch(metrale.LaunchConfig{Grid: metrale.D1(1), Block: metrale.D1(1)}, uint8(1), uint32(2), uint64(3), out)
	if !errors.Is(err, metrale.ErrInvalidArgument) || !strings.Contains(err.Error(), "parameter 1") {
		t.Fatalf("Launch with a uint32 at offset 4: %v", err)
	}
	got := make([]uint64, 6)
	_ = metrale.Download(out, got)
	if !reflect.DeepEqual(got, []uint64{7, 7, 7, 7, 7, 7}) {
		t.Fatalf("a refused launch ran: %v", got)
	}
}

// The sizes-only registration infers [2]uint16's alignment as 4: the
// launch, packed at 2, is refused instead of read at 4.
func TestArgLayoutSizesOnlyRegistrationIsCaught(t *testing.T) {
	ctx := layoutContext(t)
	if ctx.Backend() != metrale.BackendHost {
		t.Skip("host registration only")
	}
	if err := ctx.RegisterHostKernel("old", "f", testkernels.LayoutU8U16x2U64(), []uint64{1, 4, 8, 8}); err != nil {
		t.Fatal(err)
	}
	k, _ := ctx.Kernel("old", "f")
	out, _ := ctx.Alloc(6 * 8)
	defer out.Close()
	err := k.Launch(metrale.LaunchConfig{Grid: metrale.D1(1), Block: metrale.D1(1)}, uint8(1), [2]uint16{2, 3}, uint64(4), out)
	if !errors.Is(err, metrale.ErrInvalidArgument) || !strings.Contains(err.Error(), "expects offset 4") {
		t.Fatalf("Launch against the inferred layout: %v", err)
	}
}

func TestPackRefusesWhatIsNotPlainData(t *testing.T) {
	x := 1
	for name, arg := range map[string]interface{}{
		"nil":         nil,
		"nil buffer":  (*metrale.Buffer)(nil),
		"pointer":     &x,
		"string":      "s",
		"slice":       []uint32{1},
		"complex":     complex64(1),
		"zero size":   struct{}{},
		"struct ptr":  struct{ P *int }{&x},
		"empty array": [0]uint32{},
	} {
		if _, err := metrale.Pack(uint8(1), arg); !errors.Is(err, metrale.ErrInvalidArgument) || !strings.Contains(err.Error(), "argument 1") {
			t.Errorf("Pack(%s): %v, want ErrInvalidArgument naming argument 1", name, err)
		}
	}
	p, err := metrale.Pack(true, [3]int16{1, 2, 3}, struct{ A, B uint8 }{1, 2}, float64(1))
	if err != nil || !reflect.DeepEqual(p.Offsets, []uint64{0, 2, 8, 16}) || len(p.Bytes) != 24 {
		t.Fatalf("Pack: %v %v", p, err)
	}
}
