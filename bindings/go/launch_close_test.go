package metrale_test

import (
	"errors"
	"testing"
	"time"

	"metrale.dev/metrale"
	"metrale.dev/metrale/internal/testkernels"
)

// A Buffer closed while a launch runs with it as an argument must not free
// the memory under the kernel: Close waits for the launch, or the launch
// fails with ErrClosed. The buffer is named twice, which must not make the
// launch wait on itself behind the Close.
func TestCloseDuringLaunchWaitsForIt(t *testing.T) {
	ctx := testContext(t, 0)
	if ctx.Backend() != metrale.BackendHost {
		t.Skip("needs a slow host kernel")
	}
	if err := ctx.RegisterHostKernel("slow", "fill", testkernels.SlowFill(), []uint64{8, 4, 8, 8}); err != nil {
		t.Fatal(err)
	}
	k, err := ctx.Kernel("slow", "fill")
	if err != nil {
		t.Fatal(err)
	}
	const n = 1 << 16
	buf, err := ctx.AllocManaged(n) // freed at once on Close, not kept by a pool
	if err != nil {
		t.Fatal(err)
	}
	testkernels.SlowFillReset()
	launched := make(chan error, 1)
	go func() {
		launched <- k.Launch(metrale.LaunchConfig{Grid: metrale.D1(1), Block: metrale.D1(1)}, buf, uint32(0xAA), uint64(n), buf)
	}()
	for !testkernels.SlowFillStarted() {
		select {
		case err := <-launched:
			t.Fatalf("the launch returned before the kernel ran: %v", err)
		default:
			time.Sleep(time.Millisecond)
		}
	}
	closed := make(chan error, 1)
	go func() { closed <- buf.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
		if !testkernels.SlowFillDone() {
			t.Fatal("Buffer.Close returned (freeing the memory) while a kernel launched on it still ran")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Buffer.Close did not return: it deadlocked with the launch")
	}
	if err := <-launched; err != nil && !errors.Is(err, metrale.ErrClosed) {
		t.Fatalf("launch: %v", err)
	}
}
