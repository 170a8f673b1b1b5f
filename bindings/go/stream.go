package metrale

/*
#include "wrappers.h"
*/
import "C"

import (
	"runtime"
)

// Stream orders the work put on it. The default stream (DefaultStream)
// belongs to the context: its Close does nothing. A stream from NewStream
// never closed is destroyed by a finalizer, with a warning naming its site.
type Stream struct {
	ctx    *Context
	mu     closeLock
	raw    *C.metrale_stream_t
	owned  bool
	closed bool
	file   string // where NewStream was called
	line   int
}

// NewStream creates a non-blocking stream.
func (c *Context) NewStream() (*Stream, error) {
	var s *C.metrale_stream_t
	err := c.with(func(raw *C.metrale_context_t) error {
		var msg *C.char
		return result(C.mg_stream_create(&msg, raw, &s), msg)
	})
	if err != nil {
		return nil, err
	}
	st := &Stream{ctx: c, raw: s, owned: true}
	st.file, st.line = Site(1)
	c.trackStream(s)
	runtime.SetFinalizer(st, (*Stream).finalize)
	return st, nil
}

// finalize destroys a stream from NewStream that became unreachable.
func (s *Stream) finalize() {
	if s.closed {
		return
	}
	s.ctx.untrackStream(s.raw)
	finalizeDestroy(s.ctx, "a Stream", s.file, s.line, func(raw *C.metrale_context_t) error {
		var msg *C.char
		return result(C.mg_stream_destroy(&msg, raw, s.raw), msg)
	})
}

// DefaultStream is the context's own stream (what a nil *Stream means).
func (c *Context) DefaultStream() (*Stream, error) {
	var s *C.metrale_stream_t
	err := c.with(func(raw *C.metrale_context_t) error {
		s = C.metrale_default_stream(raw)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &Stream{ctx: c, raw: s}, nil
}

// use runs f with the context and the stream pointer; a nil *Stream is the
// default stream of ctx.
func (s *Stream) use(ctx *Context, f func(raw *C.metrale_context_t, st *C.metrale_stream_t) error) error {
	st, release, err := s.hold(ctx)
	if err != nil {
		return err
	}
	defer release()
	return ctx.with(func(raw *C.metrale_context_t) error { return f(raw, st) })
}

// hold takes the stream's read lock (see Buffer.hold); a nil *Stream is
// the default stream of ctx, a NULL handle.
func (s *Stream) hold(ctx *Context) (*C.metrale_stream_t, func(), error) {
	if s == nil {
		return nil, func() {}, nil
	}
	if s.ctx != ctx {
		return nil, nil, argError("the stream belongs to another context")
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return nil, nil, closedError("the stream")
	}
	return s.raw, s.mu.RUnlock, nil
}

func (s *Stream) context() *Context {
	if s == nil {
		return nil
	}
	return s.ctx
}

// Synchronize waits for all work on the stream.
func (s *Stream) Synchronize() error {
	return s.use(s.context(), func(raw *C.metrale_context_t, st *C.metrale_stream_t) error {
		var msg *C.char
		return result(C.mg_stream_synchronize(&msg, raw, st), msg)
	})
}

// IsCapturing reports whether a graph capture is active (a failed query,
// a closed stream included, counts as capturing, as in C).
func (s *Stream) IsCapturing() bool {
	yes := true
	_ = s.use(s.context(), func(raw *C.metrale_context_t, st *C.metrale_stream_t) error {
		yes = C.metrale_stream_is_capturing(raw, st) != 0
		return nil
	})
	return yes
}

// BeginCapture starts recording the stream's work into a graph.
func (s *Stream) BeginCapture() error {
	return s.use(s.context(), func(raw *C.metrale_context_t, st *C.metrale_stream_t) error {
		var msg *C.char
		if err := result(C.mg_graph_begin_capture(&msg, raw, st), msg); err != nil {
			return err
		}
		s.ctx.captureBegan(raw, st)
		return nil
	})
}

// EndCapture ends the capture and instantiates the graph. The graph keeps
// the buffers the captured work named reachable (see capture.go).
func (s *Stream) EndCapture() (*Graph, error) {
	var g *C.metrale_graph_t
	var kept []*Buffer
	err := s.use(s.context(), func(raw *C.metrale_context_t, st *C.metrale_stream_t) error {
		var msg *C.char
		err := result(C.mg_graph_end_capture(&msg, raw, st, &g), msg)
		if err == nil || C.metrale_stream_is_capturing(raw, st) == 0 {
			kept = s.ctx.captureEnded(raw, st)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	graph := &Graph{ctx: s.ctx, raw: g, kept: kept}
	graph.file, graph.line = Site(1)
	runtime.SetFinalizer(graph, (*Graph).finalize)
	return graph, nil
}

// AbortCapture drops an active capture (nil when none is active).
func (s *Stream) AbortCapture() error {
	return s.use(s.context(), func(raw *C.metrale_context_t, st *C.metrale_stream_t) error {
		var msg *C.char
		if err := result(C.mg_graph_abort_capture(&msg, raw, st), msg); err != nil {
			return err
		}
		s.ctx.captureEnded(raw, st)
		return nil
	})
}

// WaitEvent makes the stream wait for the work recorded in e.
func (s *Stream) WaitEvent(e *Event) error {
	return e.withStream(s, s.context(), func(raw *C.metrale_context_t, ev *C.metrale_event_t, st *C.metrale_stream_t) error {
		var msg *C.char
		return result(C.mg_stream_wait_event(&msg, raw, st, ev), msg)
	})
}

// Close destroys a stream made by NewStream; idempotent.
func (s *Stream) Close() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if !s.owned {
		return nil
	}
	runtime.SetFinalizer(s, nil)
	s.ctx.untrackStream(s.raw)
	return ignoreClosed(s.ctx.with(func(raw *C.metrale_context_t) error {
		var msg *C.char
		return result(C.mg_stream_destroy(&msg, raw, s.raw), msg)
	}))
}

// ignoreClosed: closing a handle after its context is a no-op, since the
// context's destroy already released it.
func ignoreClosed(err error) error {
	if e, ok := err.(*Error); ok && e.closed {
		return nil
	}
	return err
}
