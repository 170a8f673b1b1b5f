package metrale

/*
#include "wrappers.h"
*/
import "C"

import (
	"runtime"
)

// Event marks a point in a stream, to wait for or to time. One never
// closed is destroyed by a finalizer, with a warning naming its site.
type Event struct {
	ctx    *Context
	mu     closeLock
	raw    *C.metrale_event_t
	closed bool
	file   string // where NewEvent was called
	line   int
}

// NewEvent creates an event; timing false makes it cheaper.
func (c *Context) NewEvent(timing bool) (*Event, error) {
	flags := C.uint(C.METRALE_EVENT_DEFAULT)
	if !timing {
		flags = C.METRALE_EVENT_DISABLE_TIMING
	}
	var e *C.metrale_event_t
	err := c.with(func(raw *C.metrale_context_t) error {
		var msg *C.char
		return result(C.mg_event_create(&msg, raw, flags, &e), msg)
	})
	if err != nil {
		return nil, err
	}
	ev := &Event{ctx: c, raw: e}
	ev.file, ev.line = Site(1)
	runtime.SetFinalizer(ev, (*Event).finalize)
	return ev, nil
}

// finalize destroys an event that became unreachable without Close.
func (e *Event) finalize() {
	if e.closed {
		return
	}
	finalizeDestroy(e.ctx, "an Event", e.file, e.line, func(raw *C.metrale_context_t) error {
		var msg *C.char
		return result(C.mg_event_destroy(&msg, raw, e.raw), msg)
	})
}

// use runs f with the live event; ctx non-nil must be the event's context.
func (e *Event) use(ctx *Context, f func(raw *C.metrale_context_t, ev *C.metrale_event_t) error) error {
	ev, release, err := e.hold(ctx)
	if err != nil {
		return err
	}
	defer release()
	return e.ctx.with(func(raw *C.metrale_context_t) error { return f(raw, ev) })
}

// hold takes the event's read lock (see Buffer.hold).
func (e *Event) hold(ctx *Context) (*C.metrale_event_t, func(), error) {
	if e == nil {
		return nil, nil, closedError("a nil event")
	}
	if ctx != nil && ctx != e.ctx {
		return nil, nil, argError("the event belongs to another context")
	}
	e.mu.RLock()
	if e.closed {
		e.mu.RUnlock()
		return nil, nil, closedError("the event")
	}
	return e.raw, e.mu.RUnlock, nil
}

// withStream runs f with the event and s held (s's context must be sctx;
// nil s: the default stream of the event's context), then the context.
func (e *Event) withStream(s *Stream, sctx *Context, f func(raw *C.metrale_context_t, ev *C.metrale_event_t, st *C.metrale_stream_t) error) error {
	ev, releaseE, err := e.hold(sctx)
	if err != nil {
		return err
	}
	defer releaseE()
	st, releaseS, err := s.hold(e.ctx)
	if err != nil {
		return err
	}
	defer releaseS()
	return e.ctx.with(func(raw *C.metrale_context_t) error { return f(raw, ev, st) })
}

// Record records the event on s (nil: the default stream).
func (e *Event) Record(s *Stream) error {
	return e.withStream(s, s.context(), func(raw *C.metrale_context_t, ev *C.metrale_event_t, st *C.metrale_stream_t) error {
		var msg *C.char
		return result(C.mg_event_record(&msg, raw, ev, st), msg)
	})
}

// Synchronize waits for the work recorded before the event.
func (e *Event) Synchronize() error {
	return e.use(nil, func(raw *C.metrale_context_t, ev *C.metrale_event_t) error {
		var msg *C.char
		return result(C.mg_event_synchronize(&msg, raw, ev), msg)
	})
}

// Query reports whether all work before the record has completed.
func (e *Event) Query() (bool, error) {
	var done C.int
	err := e.use(nil, func(raw *C.metrale_context_t, ev *C.metrale_event_t) error {
		var msg *C.char
		return result(C.mg_event_query(&msg, raw, ev, &done), msg)
	})
	return done != 0, err
}

// ElapsedMs is the time from e to end, both recorded timing events.
func (e *Event) ElapsedMs(end *Event) (float32, error) {
	var ms C.float
	a, releaseA, err := e.hold(nil)
	if err != nil {
		return 0, err
	}
	defer releaseA()
	b, releaseB := a, func() {}
	if end != e { // one read lock is enough (a second could wait behind a Close)
		if b, releaseB, err = end.hold(e.ctx); err != nil {
			return 0, err
		}
	}
	defer releaseB()
	err = e.ctx.with(func(raw *C.metrale_context_t) error {
		var msg *C.char
		return result(C.mg_event_elapsed_ms(&msg, raw, a, b, &ms), msg)
	})
	return float32(ms), err
}

// Close destroys the event; idempotent.
func (e *Event) Close() error {
	if e == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	runtime.SetFinalizer(e, nil)
	return ignoreClosed(e.ctx.with(func(raw *C.metrale_context_t) error {
		var msg *C.char
		return result(C.mg_event_destroy(&msg, raw, e.raw), msg)
	}))
}
