package metrale

/*
#include "wrappers.h"
*/
import "C"

import (
	"fmt"
	"os"
	"sync/atomic"
)

// Handles never closed are released by finalizers, as os.File does for
// descriptors, and each such release logs a warning naming the site that
// made the handle, so the leak can be fixed. What each finalizer does:
//   - Buffer: waits for every stream of its context (work queued there may
//     still use the memory), then frees it. While a stream captures it
//     cannot tell, so it leaves the memory to the context's Close.
//   - Stream, Event, Graph: destroyed (a stream's work finishes first).
//   - Context: destroyed; the library frees and names what is still live.
//   - PinnedBuffer: only logged. Slices from Bytes point into its memory
//     and do not keep it reachable, so freeing it could pull memory from
//     under a live slice; the context's Close frees it.
//   - Kernel: nothing to release (the context owns kernels).
// A handle whose context was closed first logs nothing: the context's
// destroy already released it and named the sites.

// logLevel mirrors the library's level for the binding's own lines: set by
// SetLogLevel, starting from METRALE_LOG as the library does at load.
var logLevel atomic.Int32

func init() {
	l := LogWarn
	names := map[string]LogLevel{"trace": LogTrace, "debug": LogDebug, "info": LogInfo, "warn": LogWarn,
		"warning": LogWarn, "error": LogError, "critical": LogCritical, "off": LogOff}
	if v, ok := names[os.Getenv("METRALE_LOG")]; ok {
		l = v
	}
	logLevel.Store(int32(l))
}

// goLog sends one of the binding's own lines where the library's go: the
// SetLogCallback function, else stderr, with the library's "metrale: " prefix.
func goLog(level LogLevel, msg string) {
	cur := LogLevel(logLevel.Load())
	if cur == LogOff || level < cur {
		return
	}
	logMu.RLock()
	defer logMu.RUnlock()
	if logHandle != 0 {
		if f, ok := logHandle.Value().(func(LogLevel, string)); ok {
			f(level, "metrale: "+msg)
			return
		}
	}
	fmt.Fprintf(os.Stderr, "metrale: %s\n", msg)
}

// logLeak is the warning a finalizer gives for a handle never closed.
func logLeak(what, file string, line int, outcome string) {
	goLog(LogWarn, fmt.Sprintf("%s made at %s:%d was never closed: %s (call Close)", what, file, line, outcome))
}

// trackStream and untrackStream keep the set of the context's live streams
// (by raw handle, so a Stream stays collectable) for finalizers to wait on.
func (c *Context) trackStream(s *C.metrale_stream_t) {
	c.aux.Lock()
	defer c.aux.Unlock()
	if c.streams == nil {
		c.streams = map[*C.metrale_stream_t]struct{}{}
	}
	c.streams[s] = struct{}{}
}

func (c *Context) untrackStream(s *C.metrale_stream_t) {
	c.aux.Lock()
	defer c.aux.Unlock()
	delete(c.streams, s)
}

// syncAllStreams waits for the default stream and every live stream made by
// NewStream. Called with the context live (inside with).
func (c *Context) syncAllStreams(raw *C.metrale_context_t) error {
	c.aux.Lock()
	list := make([]*C.metrale_stream_t, 0, len(c.streams)+1)
	list = append(list, nil)
	for s := range c.streams {
		list = append(list, s)
	}
	c.aux.Unlock()
	for _, s := range list {
		var msg *C.char
		err := result(C.mg_stream_synchronize(&msg, raw, s), msg)
		if err != nil && !(s != nil && isStatus(err, ErrInvalidArgument)) { // a stream closed meanwhile
			return err
		}
	}
	return nil
}

func isStatus(err error, s Status) bool {
	e, ok := err.(*Error)
	return ok && e.Status == s
}

// finalize frees a Buffer that became unreachable without Close.
func (b *Buffer) finalize() {
	if b.closed {
		return
	}
	b.closed = true
	outcome := ""
	err := b.ctx.with(func(raw *C.metrale_context_t) error {
		if err := b.ctx.syncAllStreams(raw); err != nil {
			outcome = fmt.Sprintf("not freed, its streams could not be waited for (%v); the context's Close frees it", err)
			return nil
		}
		var msg *C.char
		if err := result(C.mg_free(&msg, raw, C.metrale_devptr_t(b.ptr)), msg); err != nil {
			outcome = fmt.Sprintf("the garbage collector could not free it: %v", err)
			return nil
		}
		outcome = "the garbage collector freed it"
		return nil
	})
	// After the free, as in Close.
	b.ctx.buffers.Add(-1)
	if err != nil { // the context was closed first and freed it
		return
	}
	logLeak(fmt.Sprintf("a Buffer of %d bytes", b.size), b.file, b.line, outcome)
}

// finalizeDestroy is the shared finalizer body of Stream, Event and Graph:
// destroy runs with the live context; nothing is logged once it is closed.
func finalizeDestroy(ctx *Context, what, file string, line int, destroy func(raw *C.metrale_context_t) error) {
	outcome := ""
	err := ctx.with(func(raw *C.metrale_context_t) error {
		if err := destroy(raw); err != nil {
			outcome = fmt.Sprintf("the garbage collector could not destroy it: %v", err)
		} else {
			outcome = "the garbage collector destroyed it"
		}
		return nil
	})
	if err == nil {
		logLeak(what, file, line, outcome)
	}
}
