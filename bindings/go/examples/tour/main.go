// The tour in Go: what libmetrale_gpu tells you, as tour.c shows it.
//
// A context with red zones, allocations from two call sites, copies, a
// kernel launch (a C host kernel on the host backend, PTX on a GPU), a graph
// captured and replayed, a red-zone overflow planted and caught, then the
// ledger report and the counters.
//
//	go run ./examples/tour
package main

/*
#include <metrale_gpu.h>

// add_f32 for the host backend: c[i] = a[i] + b[i] for i < n.
static metrale_status_t add_f32_host(const metrale_host_kernel_call_t* call, void* user) {
  (void)user;
  const float* a = *(const float* const*)call->params[0];
  const float* b = *(const float* const*)call->params[1];
  float* c = *(float* const*)call->params[2];
  uint64_t n = *(const uint64_t*)call->params[3];
  for (uint64_t i = 0; i < n; i++) c[i] = a[i] + b[i];
  return METRALE_OK;
}
static void* add_f32_host_ptr(void) { return (void*)add_f32_host; }
*/
import "C"

import (
	"fmt"
	"os"

	"metrale.dev/metrale"
)

const (
	n       = 4096
	redzone = 64
)

// add_f32 for the GPU, as PTX text (the driver JIT-compiles it).
const addF32PTX = ".version 7.0\n.target sm_75\n.address_size 64\n" +
	".visible .entry add_f32(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u64 pn)\n{\n" +
	"  .reg .pred %p<2>; .reg .f32 %f<4>; .reg .b32 %r<4>; .reg .b64 %rd<15>;\n" +
	"  ld.param.u64 %rd2, [pa]; ld.param.u64 %rd3, [pb];\n" +
	"  ld.param.u64 %rd4, [pc]; ld.param.u64 %rd5, [pn];\n" +
	"  mov.u32 %r1, %ctaid.x; mov.u32 %r2, %ntid.x; mul.wide.u32 %rd6, %r1, %r2;\n" +
	"  mov.u32 %r3, %tid.x; cvt.u64.u32 %rd7, %r3; add.s64 %rd1, %rd6, %rd7;\n" +
	"  setp.ge.u64 %p1, %rd1, %rd5; @%p1 bra DONE;\n" +
	"  cvta.to.global.u64 %rd8, %rd2; shl.b64 %rd9, %rd1, 2; add.s64 %rd10, %rd8, %rd9;\n" +
	"  cvta.to.global.u64 %rd11, %rd3; add.s64 %rd12, %rd11, %rd9;\n" +
	"  ld.global.f32 %f1, [%rd12]; ld.global.f32 %f2, [%rd10]; add.f32 %f3, %f2, %f1;\n" +
	"  cvta.to.global.u64 %rd13, %rd4; add.s64 %rd14, %rd13, %rd9; st.global.f32 [%rd14], %f3;\n" +
	"DONE:\n  ret;\n}\n\x00"

// allocOutput is a second allocation site, so the ledger names two lines.
func allocOutput(ctx *metrale.Context) (*metrale.Buffer, error) {
	return ctx.Alloc(n * 4)
}

func loadKernel(ctx *metrale.Context) (*metrale.Kernel, error) {
	var err error
	if ctx.Backend() == metrale.BackendHost {
		err = ctx.RegisterHostKernel("tour", "add_f32", C.add_f32_host_ptr(), []uint64{8, 8, 8, 8})
	} else {
		err = ctx.LoadModuleData("tour", []byte(addF32PTX))
	}
	if err != nil {
		return nil, err
	}
	return ctx.Kernel("tour", "add_f32")
}

func add(k *metrale.Kernel, s *metrale.Stream, a, b, c *metrale.Buffer, count uint64) error {
	cfg := metrale.LaunchConfig{Grid: metrale.D1(uint32((count + 255) / 256)), Block: metrale.D1(256), Stream: s}
	return k.Launch(cfg, a, b, c, count)
}

func check(c *metrale.Buffer, factor float32) error {
	h := make([]float32, n)
	if err := metrale.Download(c, h); err != nil {
		return err
	}
	for i, v := range h {
		if v != factor*float32(i) {
			return fmt.Errorf("c[%d] = %g, expected %g", i, v, factor*float32(i))
		}
	}
	return nil
}

func tour() error {
	metrale.SetLogCallback(func(level metrale.LogLevel, msg string) {
		fmt.Fprintf(os.Stderr, "[metrale %s] %s\n", level, msg)
	})
	defer metrale.SetLogCallback(nil)

	opts := metrale.DefaultOptions()
	opts.RedzoneBytes = redzone
	opts.LaunchTrace = true
	ctx, err := metrale.NewContext(&opts)
	if err != nil {
		return err
	}
	defer ctx.Close()
	info, err := ctx.DeviceInfo()
	if err != nil {
		return err
	}
	fmt.Printf("1. context on the %s backend: %s, %d MiB\n", ctx.Backend(), info.Name, info.TotalMemory>>20)

	a, err := ctx.Alloc(n * 4)
	if err != nil {
		return err
	}
	b, err := ctx.Alloc(n * 4)
	if err != nil {
		return err
	}
	c, err := allocOutput(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("2. three allocations of %d bytes from two call sites\n", n*4)

	ha, hb := make([]float32, n), make([]float32, n)
	for i := range ha {
		ha[i], hb[i] = float32(i), 2*float32(i)
	}
	if err := metrale.Upload(a, ha); err != nil {
		return err
	}
	if err := metrale.Upload(b, hb); err != nil {
		return err
	}
	fmt.Println("3. copied inputs to the device")

	k, err := loadKernel(ctx)
	if err != nil {
		return err
	}
	if err := add(k, nil, a, b, c, n); err != nil {
		return err
	}
	if err := check(c, 3); err != nil {
		return err
	}
	fmt.Println("4. launched add_f32: c = a + b checked on the host")

	s, err := ctx.NewStream()
	if err != nil {
		return err
	}
	defer s.Close()
	if err := s.BeginCapture(); err != nil {
		return err
	}
	for i := 0; i < 3; i++ {
		if err := add(k, s, c, b, c, n); err != nil {
			return err
		}
	}
	g, err := s.EndCapture()
	if err != nil {
		return err
	}
	defer g.Close()
	for i := 0; i < 2; i++ {
		if err := g.Launch(s); err != nil {
			return err
		}
	}
	if err := s.Synchronize(); err != nil {
		return err
	}
	if err := check(c, 15); err != nil { // c = a + 7b
		return err
	}
	fmt.Println("5. graph of 3 launches captured, replayed twice, checked")

	// The bug on purpose: n four elements too large writes 16 bytes past c.
	if err := add(k, nil, a, b, c, n+4); err != nil {
		return err
	}
	if err := ctx.Synchronize(); err != nil {
		return err
	}
	v, err := ctx.RedzoneScan()
	if err != nil {
		return err
	}
	if len(v) != 1 || v[0].Ptr != c.Ptr() {
		return fmt.Errorf("the planted overflow was not caught: %+v", v)
	}
	fmt.Printf("6. red-zone scan caught the overflow: %#x (%d bytes) from %s:%d, %d bytes overwritten from pad offset %d (expected %#02x, found %#02x)\n",
		v[0].Ptr, v[0].Bytes, v[0].File, v[0].Line, v[0].BadBytes, v[0].FirstBadOffset, v[0].Expected, v[0].Found)

	report, err := ctx.AllocReport(0, 0)
	if err != nil {
		return err
	}
	fmt.Printf("7. ledger report:\n%s", report)
	cnt, err := ctx.Counters()
	if err != nil {
		return err
	}
	trace, err := ctx.LaunchTrace()
	if err != nil {
		return err
	}
	if len(trace) == 0 || trace[0].Kind != metrale.TraceLaunch {
		return fmt.Errorf("the launch trace does not start with the first launch: %+v", trace)
	}
	fmt.Printf("8. counters: %d launches, %d graph launches, %d h2d (%d bytes), %d d2h (%d bytes), %d allocs, %d stream syncs; %d trace entries, the first a %s of %s with grid %d\n",
		cnt.Launches, cnt.GraphLaunches, cnt.H2DCopies, cnt.H2DBytes, cnt.D2HCopies, cnt.D2HBytes, cnt.Allocs, cnt.StreamSyncs,
		len(trace), trace[0].Kind, trace[0].Kernel, trace[0].Grid.X)

	if err := a.Close(); err != nil {
		return err
	}
	if err := b.Close(); err != nil {
		return err
	}
	// c is left on purpose: closing the context sweeps it and names its site.
	fmt.Println("9. freed two buffers; closing the context sweeps the third")
	return nil
}

func main() {
	if err := tour(); err != nil {
		fmt.Fprintf(os.Stderr, "tour: FAILED: %v\n", err)
		os.Exit(1)
	}
	fmt.Println("tour: ok")
}
