package metrale

/*
#include "wrappers.h"
*/
import "C"

import (
	"runtime"
)

// Graph is work captured from a stream, replayed by Launch. It keeps the
// buffers its capture named reachable until Close. One never closed is
// destroyed by a finalizer, with a warning naming its site.
type Graph struct {
	ctx    *Context
	mu     closeLock
	raw    *C.metrale_graph_t
	closed bool
	kept   []*Buffer // what the replays write and read (see capture.go)
	file   string    // where EndCapture was called
	line   int
}

// finalize destroys a graph that became unreachable without Close.
func (g *Graph) finalize() {
	if g.closed {
		return
	}
	finalizeDestroy(g.ctx, "a Graph", g.file, g.line, func(raw *C.metrale_context_t) error {
		var msg *C.char
		return result(C.mg_graph_destroy(&msg, raw, g.raw), msg)
	})
}

// Launch replays the graph on s (nil: the default stream).
func (g *Graph) Launch(s *Stream) error {
	if g == nil {
		return closedError("a nil graph")
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.closed {
		return closedError("the graph")
	}
	return s.use(g.ctx, func(raw *C.metrale_context_t, st *C.metrale_stream_t) error {
		var msg *C.char
		return result(C.mg_graph_launch(&msg, raw, g.raw, st), msg)
	})
}

// Close destroys the graph; idempotent.
func (g *Graph) Close() error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil
	}
	g.closed = true
	g.kept = nil
	runtime.SetFinalizer(g, nil)
	return ignoreClosed(g.ctx.with(func(raw *C.metrale_context_t) error {
		var msg *C.char
		return result(C.mg_graph_destroy(&msg, raw, g.raw), msg)
	}))
}
