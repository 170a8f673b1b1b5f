package metrale_test

import (
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"metrale.dev/metrale"
)

// A log callback runs inside the call that logged, which holds the context
// for reading, and may call back into the context (SetLogCallback's doc).
// A Close waiting meanwhile must not block that nested call: it waits for
// the outer one, which waits for the callback.
func TestLogCallbackCallsBackWhileCloseWaits(t *testing.T) {
	ctx := testContext(t, 0)
	inCallback := make(chan struct{})
	proceed := make(chan struct{})
	var armed atomic.Bool
	armed.Store(true)
	var nestedErr error
	metrale.SetLogCallback(func(l metrale.LogLevel, m string) {
		if !armed.CompareAndSwap(true, false) {
			return
		}
		close(inCallback)
		<-proceed
		_, nestedErr = ctx.LiveBytes()
	})
	defer metrale.SetLogCallback(nil)
	if err := metrale.SetLogLevel(metrale.LogDebug); err != nil {
		t.Fatal(err)
	}
	defer metrale.SetLogLevel(metrale.LogWarn)
	allocated := make(chan error, 1)
	go func() {
		b, err := ctx.Alloc(32 << 20) // logs its debug line inside the call
		if err == nil {
			err = b.Close()
		}
		allocated <- err
	}()
	<-inCallback
	closed := make(chan error, 1)
	go func() { closed <- ctx.Close() }()
	time.Sleep(100 * time.Millisecond) // the Close waits for the Alloc by now
	close(proceed)
	select {
	case <-allocated:
	case <-time.After(10 * time.Second):
		// Exit, not Fatal: the deferred calls would wait for the deadlock.
		st := make([]byte, 1<<20)
		st = st[:runtime.Stack(st, true)]
		fmt.Fprintf(os.Stderr, "FAIL: the callback's call waited for the Close that waits for it:\n%s", st)
		os.Exit(1)
	}
	if nestedErr != nil {
		t.Errorf("LiveBytes from the callback: %v", nestedErr)
	}
	if err := <-closed; err != nil {
		t.Errorf("Close: %v", err)
	}
}
