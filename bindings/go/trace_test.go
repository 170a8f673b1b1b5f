package metrale_test

import (
	"errors"
	"testing"

	"metrale.dev/metrale"
)

func TestMemsetAsyncAndTheLaunchTrace(t *testing.T) {
	ctx := testContext(t, 0)
	if err := ctx.EnableLaunchTrace(true); err != nil {
		t.Fatal(err)
	}
	if err := ctx.ResetCounters(); err != nil {
		t.Fatal(err)
	}
	buf, _ := ctx.Alloc(32)
	s, _ := ctx.NewStream()
	defer s.Close()
	if err := buf.MemsetAsync(0x5A, s); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	got := make([]uint8, 32)
	if err := metrale.Download(buf, got); err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		if v != 0x5A {
			t.Fatalf("byte %d = %#x after MemsetAsync", i, v)
		}
	}
	k, _ := ctx.Kernel("test_kernels", "fill_u32")
	if err := k.Launch(metrale.LaunchConfig{Grid: metrale.D1(2), Block: metrale.D1(4), SharedBytes: 16}, buf, uint32(7), uint64(8)); err != nil {
		t.Fatal(err)
	}
	tr, err := ctx.LaunchTrace()
	if err != nil || len(tr) != 2 {
		t.Fatalf("LaunchTrace: %+v %v", tr, err)
	}
	m, l := tr[0], tr[1]
	if m.Kind != metrale.TraceMemset || m.Kernel != "" || len(m.Args) != 3 ||
		m.Args[0] != uint64(buf.Ptr()) || m.Args[1] != 0x5A || m.Args[2] != 32 || m.Kind.String() != "memset" {
		t.Errorf("memset entry %+v", m)
	}
	if l.Kind != metrale.TraceLaunch || l.Kernel != "test_kernels::fill_u32" || l.Grid != metrale.D1(2) ||
		l.Block != metrale.D1(4) || l.SharedBytes != 16 || len(l.Args) != 3 || l.Args[0] != uint64(buf.Ptr()) ||
		l.Args[1] != 7 || l.Args[2] != 8 {
		t.Errorf("launch entry %+v", l)
	}
	c, err := ctx.Counters()
	if err != nil || c.Memsets != 1 || c.MemsetBytes != 32 || c.Launches != 1 || c.Allocs != 1 || c.AllocBytes != 32 {
		t.Errorf("counters %+v %v", c, err)
	}
	if err := buf.Close(); err != nil {
		t.Fatal(err)
	}
	if err := buf.MemsetAsync(0, s); !errors.Is(err, metrale.ErrClosed) {
		t.Errorf("MemsetAsync after Close: %v", err)
	}
	other, _ := ctx.NewStream()
	defer other.Close()
	ctx2 := testContext(t, 0)
	b2, _ := ctx2.Alloc(8)
	if err := b2.MemsetAsync(0, other); !errors.Is(err, metrale.ErrInvalidArgument) {
		t.Errorf("MemsetAsync on another context's stream: %v", err)
	}
}
