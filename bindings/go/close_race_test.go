package metrale_test

import (
	"sync"
	"testing"
	"time"

	"metrale.dev/metrale"
)

// Context.Close waits for calls in flight; calls that use two handles (an
// event and a stream, a buffer and a stream, two buffers) must not take the
// context's lock twice, or a Close arriving between the two would wait for
// the first while the second waits behind it: a deadlock.
func TestCloseDuringTwoHandleCallsDoesNotDeadlock(t *testing.T) {
	// Each round closes a context under live buffers: keep the sweep's
	// warnings out of the test's output.
	if err := metrale.SetLogLevel(metrale.LogError); err != nil {
		t.Fatal(err)
	}
	defer metrale.SetLogLevel(metrale.LogWarn)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for round := 0; round < 100; round++ {
			ctx := testContext(t, 0)
			s, _ := ctx.NewStream()
			e, _ := ctx.NewEvent(false)
			a, _ := ctx.Alloc(64)
			b, _ := ctx.Alloc(64)
			var wg sync.WaitGroup
			for g := 0; g < 4; g++ {
				wg.Add(1)
				go func(g int) {
					defer wg.Done()
					for i := 0; i < 1000; i++ {
						var err error
						switch (g + i) % 4 {
						case 0:
							err = e.Record(s)
						case 1:
							err = b.CopyFrom(a)
						case 2:
							err = a.MemsetAsync(1, s)
						case 3:
							err = s.WaitEvent(e)
						}
						if err != nil {
							return // the context closed
						}
					}
				}(g)
			}
			time.Sleep(200 * time.Microsecond)
			ctx.Close()
			wg.Wait()
		}
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("deadlock: Context.Close and calls on two handles wait for each other")
	}
}
