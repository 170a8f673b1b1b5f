package metrale_test

import (
	"errors"
	"testing"

	"metrale.dev/metrale"
)

// SweepUnreleased must not free memory an open Buffer owns: the Buffer
// would stay usable on memory the pool hands to the next Alloc.
func TestSweepRefusesWhileABufferIsOpen(t *testing.T) {
	ctx := testContext(t, 0)
	a, err := ctx.Alloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := ctx.SweepUnreleased(); !errors.Is(err, metrale.ErrInvalidArgument) || n != 0 {
		t.Fatalf("SweepUnreleased with a Buffer open: %d, %v; want 0 and ErrInvalidArgument", n, err)
	}
	if live, err := ctx.LiveCount(); err != nil || live != 1 {
		t.Fatalf("LiveCount after the refused sweep: %d, %v; want 1", live, err)
	}
	if err := a.CopyFromHost(make([]byte, 4096)); err != nil {
		t.Fatalf("the buffer after the refused sweep: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if n, err := ctx.SweepUnreleased(); err != nil || n != 0 {
		t.Fatalf("SweepUnreleased once the Buffer is closed: %d, %v; want 0, nil", n, err)
	}
}
