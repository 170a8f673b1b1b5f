package metrale_test

import (
	"runtime"
	"testing"
	"time"

	"metrale.dev/metrale"
)

func pinnedSliceOnly(t *testing.T) []byte {
	o := metrale.DefaultOptions()
	o.Backend = metrale.BackendHost
	ctx, err := metrale.NewContext(&o)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := ctx.AllocPinned(4 << 20) // large: its free unmaps it
	if err != nil {
		t.Fatal(err)
	}
	b := pb.Bytes()
	for i := range b {
		b[i] = 7
	}
	return b // neither pb nor ctx stays reachable
}

// A slice from PinnedBuffer.Bytes outlives both its buffer and its context,
// none of them closed: the buffer's finalizer leaves the memory (the slice
// may use it), and so must the context's, which ran after it and freed it.
func TestPinnedSliceOutlivesFinalizedContext(t *testing.T) {
	b := pinnedSliceOnly(t)
	for i := 0; i < 5; i++ {
		runtime.GC()
		time.Sleep(20 * time.Millisecond)
	}
	sum := 0
	for _, v := range b { // a fault here kills the test binary
		sum += int(v)
	}
	if sum != 7*len(b) {
		t.Fatalf("the slice reads %d, want %d", sum, 7*len(b))
	}
}
