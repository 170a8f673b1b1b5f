package metrale

/*
#include "wrappers.h"
*/
import "C"

// A graph replays into the buffers its capture used. Their finalizers must
// not free them while the graph may replay, so every Buffer that a
// capturing stream's work names (Kernel.Launch arguments, async copies and
// memsets) is kept in a list per capturing stream, which EndCapture hands
// to the Graph; the Graph holds them until it is closed or collected.
// Pointers passed as DevPtr or inside LaunchPacked bytes are not seen:
// keep those buffers reachable yourself.

// rawStream is the stream handle a call used (nil: the default stream).
func rawStream(raw *C.metrale_context_t, st *C.metrale_stream_t) *C.metrale_stream_t {
	if st == nil {
		return C.metrale_default_stream(raw)
	}
	return st
}

// captureBegan opens the list for a stream that now captures.
func (c *Context) captureBegan(raw *C.metrale_context_t, st *C.metrale_stream_t) {
	c.aux.Lock()
	defer c.aux.Unlock()
	if c.captures == nil {
		c.captures = map[*C.metrale_stream_t][]*Buffer{}
	}
	c.captures[rawStream(raw, st)] = []*Buffer{}
}

// captureEnded closes the stream's list and returns what it held.
func (c *Context) captureEnded(raw *C.metrale_context_t, st *C.metrale_stream_t) []*Buffer {
	c.aux.Lock()
	defer c.aux.Unlock()
	key := rawStream(raw, st)
	kept := c.captures[key]
	delete(c.captures, key)
	return kept
}

// noteCaptured adds bufs to the list of st when st captures.
func (c *Context) noteCaptured(raw *C.metrale_context_t, st *C.metrale_stream_t, bufs ...*Buffer) {
	c.aux.Lock()
	defer c.aux.Unlock()
	if len(c.captures) == 0 {
		return
	}
	key := rawStream(raw, st)
	if list, ok := c.captures[key]; ok {
		c.captures[key] = append(list, bufs...)
	}
}
