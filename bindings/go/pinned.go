package metrale

/*
#include "wrappers.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"
)

// PinnedBuffer is page-locked host memory. Close frees it. One never closed
// is only reported by its finalizer (slices from Bytes may still use the
// memory); the context's Close frees it.
type PinnedBuffer struct {
	ctx    *Context
	mu     sync.Mutex
	ptr    unsafe.Pointer
	size   uint64
	closed bool
	file   string // where AllocPinned was called
	line   int
}

// AllocPinned allocates page-locked host memory.
func (c *Context) AllocPinned(bytes uint64) (*PinnedBuffer, error) {
	file, line := Site(1)
	var p unsafe.Pointer
	err := c.with(func(raw *C.metrale_context_t) error {
		var msg *C.char
		return result(C.mg_host_alloc_pinned(&msg, raw, C.size_t(bytes), &p), msg)
	})
	if err != nil {
		return nil, err
	}
	pb := &PinnedBuffer{ctx: c, ptr: p, size: bytes, file: file, line: line}
	runtime.SetFinalizer(pb, (*PinnedBuffer).finalize)
	return pb, nil
}

// finalize reports a PinnedBuffer never closed (see the type's comment).
func (p *PinnedBuffer) finalize() {
	if p.closed {
		return
	}
	if p.ctx.with(func(*C.metrale_context_t) error { return nil }) == nil {
		// Before the context's own finalizer (it is reachable from p): that
		// one then leaves the context, and this memory, alone.
		p.ctx.pinnedLeaked.Add(1)
		logLeak(fmt.Sprintf("a PinnedBuffer of %d bytes", p.size), p.file, p.line,
			"not freed (slices from Bytes may still use it); the context's Close frees it")
	}
}

// Bytes is the memory as a slice; nil after Close and for a nil
// PinnedBuffer. Do not keep the slice past Close (of the buffer or its
// context): the memory is gone then. Without a Close it stays valid: the
// finalizers of the buffer and of its context then leave the memory (and
// the context) allocated, and say so in the log.
func (p *PinnedBuffer) Bytes() []byte {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []byte
	if !p.closed && p.ptr != nil {
		_ = p.ctx.with(func(*C.metrale_context_t) error {
			out = unsafe.Slice((*byte)(p.ptr), p.size)
			return nil
		})
	}
	return out
}

// Close frees the memory; idempotent.
func (p *PinnedBuffer) Close() error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	runtime.SetFinalizer(p, nil)
	err := p.ctx.with(func(raw *C.metrale_context_t) error {
		var msg *C.char
		return result(C.mg_host_free_pinned(&msg, raw, p.ptr), msg)
	})
	if e, ok := err.(*Error); ok && e.closed {
		return nil
	}
	return err
}
