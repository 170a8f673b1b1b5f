package metrale

/*
#include "wrappers.h"
*/
import "C"

import (
	"runtime"
	"sort"
	"unsafe"
)

// DevPtr is a device address (a host address on the host backend).
type DevPtr uint64

// Buffer is device memory on the context's ledger. Close frees it; a
// Buffer never closed is freed by a finalizer once unreachable, with a
// warning naming its allocation site (see finalize.go). Keep the Buffer
// reachable (runtime.KeepAlive) while a DevPtr taken from Ptr is in use, as
// with os.File's Fd; a graph keeps the buffers passed to Kernel.Launch and
// the async copies while it captured.
type Buffer struct {
	ctx    *Context
	mu     closeLock
	ptr    DevPtr
	size   uint64
	closed bool
	file   string // the allocation site, for the finalizer's warning
	line   int
}

// Alloc allocates bytes of device memory; the ledger records the caller's
// file and line.
func (c *Context) Alloc(bytes uint64) (*Buffer, error) {
	file, line := Site(1)
	return c.alloc(bytes, file, line, false)
}

// AllocManaged is Alloc for managed (unified) memory.
func (c *Context) AllocManaged(bytes uint64) (*Buffer, error) {
	file, line := Site(1)
	return c.alloc(bytes, file, line, true)
}

// AllocAt is Alloc with the site given, for helpers that allocate on their
// callers' behalf: file, line := metrale.Site(1) gives their caller's site
// in the shared format (see Site).
func (c *Context) AllocAt(bytes uint64, file string, line int) (*Buffer, error) {
	return c.alloc(bytes, file, line, false)
}

func (c *Context) alloc(bytes uint64, file string, line int, managed bool) (*Buffer, error) {
	f := C.CString(file)
	defer freeC(f)
	var ptr C.metrale_devptr_t
	if c != nil {
		c.sweepGate.RLock()
		defer c.sweepGate.RUnlock()
	}
	err := c.with(func(raw *C.metrale_context_t) error {
		var msg *C.char
		if managed {
			return result(C.mg_alloc_managed_at(&msg, raw, C.size_t(bytes), f, C.int(line), &ptr), msg)
		}
		return result(C.mg_alloc_at(&msg, raw, C.size_t(bytes), f, C.int(line), &ptr), msg)
	})
	if err != nil {
		return nil, err
	}
	b := &Buffer{ctx: c, ptr: DevPtr(ptr), size: bytes, file: file, line: line}
	c.buffers.Add(1)
	runtime.SetFinalizer(b, (*Buffer).finalize)
	return b, nil
}

// use runs f while neither the buffer nor its context can be closed.
func (b *Buffer) use(f func(raw *C.metrale_context_t, ptr C.metrale_devptr_t) error) error {
	ptr, release, err := b.hold()
	if err != nil {
		return err
	}
	defer release()
	return b.ctx.with(func(raw *C.metrale_context_t) error { return f(raw, ptr) })
}

// hold takes the buffer's read lock (Close waits) and gives its pointer.
// Calls on several handles hold each first, then take the context's lock
// once: taking it twice would deadlock with a Close waiting in between.
func (b *Buffer) hold() (C.metrale_devptr_t, func(), error) {
	if b == nil {
		return 0, nil, closedError("a nil buffer")
	}
	b.mu.RLock()
	if b.closed {
		b.mu.RUnlock()
		return 0, nil, closedError("the buffer")
	}
	return C.metrale_devptr_t(b.ptr), b.mu.RUnlock, nil
}

// holdBuffers holds each of bufs (see hold) and gives their pointers in
// bufs' order. A buffer named twice is held once, and they are taken in
// address order: a second read lock, or two calls taking the same pair in
// opposite orders, could wait behind a Close waiting in between.
func holdBuffers(bufs []*Buffer) ([]C.metrale_devptr_t, func(), error) {
	order := append([]*Buffer(nil), bufs...)
	sort.Slice(order, func(i, j int) bool {
		return uintptr(unsafe.Pointer(order[i])) < uintptr(unsafe.Pointer(order[j]))
	})
	held := make(map[*Buffer]C.metrale_devptr_t, len(order))
	var releases []func()
	release := func() {
		for i := len(releases) - 1; i >= 0; i-- {
			releases[i]()
		}
	}
	for _, b := range order {
		if _, ok := held[b]; ok {
			continue
		}
		ptr, rel, err := b.hold()
		if err != nil {
			release()
			return nil, nil, err
		}
		held[b] = ptr
		releases = append(releases, rel)
	}
	ptrs := make([]C.metrale_devptr_t, len(bufs))
	for i, b := range bufs {
		ptrs[i] = held[b]
	}
	return ptrs, release, nil
}

// withStream runs f with the buffer and stream s held, then the context.
func (b *Buffer) withStream(s *Stream, f func(raw *C.metrale_context_t, st *C.metrale_stream_t, ptr C.metrale_devptr_t) error) error {
	st, releaseS, err := s.hold(b.ctx)
	if err != nil {
		return err
	}
	defer releaseS()
	ptr, releaseB, err := b.hold()
	if err != nil {
		return err
	}
	defer releaseB()
	return b.ctx.with(func(raw *C.metrale_context_t) error { return f(raw, st, ptr) })
}

// live is nil while the buffer and its context are open.
func (b *Buffer) live() error {
	return b.use(func(*C.metrale_context_t, C.metrale_devptr_t) error { return nil })
}

// Size is the buffer's size in bytes (0 for a nil Buffer).
func (b *Buffer) Size() uint64 {
	if b == nil {
		return 0
	}
	return b.size
}

// Ptr is the device address (0 after Close, and for a nil Buffer).
func (b *Buffer) Ptr() DevPtr {
	if b == nil {
		return 0
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return 0
	}
	return b.ptr
}

// fits checks n bytes against the buffer (a nil Buffer is ErrClosed).
func (b *Buffer) fits(n uint64, what string) error {
	if b == nil {
		return closedError(what + ": a nil buffer")
	}
	if n > b.size {
		return argError("%s: %d bytes given, the buffer holds %d", what, n, b.size)
	}
	return nil
}

// CopyFromHost copies src to the start of the buffer (not past its end).
func (b *Buffer) CopyFromHost(src []byte) error {
	if err := b.fits(uint64(len(src)), "CopyFromHost"); err != nil || len(src) == 0 {
		if err == nil {
			err = b.live() // nothing to copy, but a closed buffer is still an error
		}
		return err
	}
	return b.use(func(raw *C.metrale_context_t, ptr C.metrale_devptr_t) error {
		var msg *C.char
		return result(C.mg_copy_h2d(&msg, raw, unsafe.Pointer(&src[0]), C.size_t(len(src)), ptr), msg)
	})
}

// CopyToHost fills dst from the start of the buffer.
func (b *Buffer) CopyToHost(dst []byte) error {
	if err := b.fits(uint64(len(dst)), "CopyToHost"); err != nil || len(dst) == 0 {
		if err == nil {
			err = b.live() // nothing to copy, but a closed buffer is still an error
		}
		return err
	}
	return b.use(func(raw *C.metrale_context_t, ptr C.metrale_devptr_t) error {
		var msg *C.char
		return result(C.mg_copy_d2h(&msg, raw, ptr, unsafe.Pointer(&dst[0]), C.size_t(len(dst))), msg)
	})
}

// CopyFromHostAsync copies src on stream; src may be reused on return.
func (b *Buffer) CopyFromHostAsync(src []byte, s *Stream) error {
	if err := b.fits(uint64(len(src)), "CopyFromHostAsync"); err != nil || len(src) == 0 {
		if err == nil {
			err = b.withStream(s, func(*C.metrale_context_t, *C.metrale_stream_t, C.metrale_devptr_t) error { return nil })
		}
		return err
	}
	return b.withStream(s, func(raw *C.metrale_context_t, st *C.metrale_stream_t, ptr C.metrale_devptr_t) error {
		var msg *C.char
		if err := result(C.mg_copy_h2d_async(&msg, raw, unsafe.Pointer(&src[0]), C.size_t(len(src)), ptr, st), msg); err != nil {
			return err
		}
		b.ctx.noteCaptured(raw, st, b)
		return nil
	})
}

// CopyToHostOnStream copies into dst on stream and waits for the stream.
func (b *Buffer) CopyToHostOnStream(dst []byte, s *Stream) error {
	if err := b.fits(uint64(len(dst)), "CopyToHostOnStream"); err != nil || len(dst) == 0 {
		if err == nil {
			err = b.withStream(s, func(*C.metrale_context_t, *C.metrale_stream_t, C.metrale_devptr_t) error { return nil })
		}
		return err
	}
	return b.withStream(s, func(raw *C.metrale_context_t, st *C.metrale_stream_t, ptr C.metrale_devptr_t) error {
		var msg *C.char
		return result(C.mg_copy_d2h_on_stream(&msg, raw, ptr, unsafe.Pointer(&dst[0]), C.size_t(len(dst)), st), msg)
	})
}

// CopyFrom copies all of src (same context) to the start of b.
func (b *Buffer) CopyFrom(src *Buffer) error {
	if b == nil {
		return closedError("CopyFrom: a nil buffer")
	}
	if src == nil || src.ctx != b.ctx {
		return argError("CopyFrom: the source is nil or from another context")
	}
	if err := b.fits(src.size, "CopyFrom"); err != nil {
		return err
	}
	ptrs, release, err := holdBuffers([]*Buffer{src, b})
	if err != nil {
		return err
	}
	defer release()
	return b.ctx.with(func(raw *C.metrale_context_t) error {
		var msg *C.char
		return result(C.mg_copy_d2d(&msg, raw, ptrs[0], ptrs[1], C.size_t(src.size)), msg)
	})
}

// Memset sets every byte of the buffer to value.
func (b *Buffer) Memset(value byte) error {
	return b.use(func(raw *C.metrale_context_t, ptr C.metrale_devptr_t) error {
		var msg *C.char
		return result(C.mg_memset(&msg, raw, ptr, C.uint8_t(value), C.size_t(b.size)), msg)
	})
}

// MemsetAsync sets every byte of the buffer to value on s (nil: the
// default stream) and returns without waiting; the launch trace records it
// when on. While s captures, the graph keeps the buffer reachable.
func (b *Buffer) MemsetAsync(value byte, s *Stream) error {
	if b == nil {
		return closedError("MemsetAsync: a nil buffer")
	}
	return b.withStream(s, func(raw *C.metrale_context_t, st *C.metrale_stream_t, ptr C.metrale_devptr_t) error {
		var msg *C.char
		if err := result(C.mg_memset_async(&msg, raw, ptr, C.uint8_t(value), C.size_t(b.size), st), msg); err != nil {
			return err
		}
		b.ctx.noteCaptured(raw, st, b)
		return nil
	})
}

// Close frees the buffer. A second Close, or one after the context was
// closed (which freed it), returns nil.
func (b *Buffer) Close() error {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	runtime.SetFinalizer(b, nil)
	err := b.ctx.with(func(raw *C.metrale_context_t) error {
		var msg *C.char
		return result(C.mg_free(&msg, raw, C.metrale_devptr_t(b.ptr)), msg)
	})
	if b.ctx != nil { // nil in a zero Buffer, which counted nothing
		// Only after the free: a sweep in between would free the memory first.
		b.ctx.buffers.Add(-1)
	}
	if e, ok := err.(*Error); ok && e.closed {
		return nil
	}
	return err
}

// Numeric is the element types Upload and Download accept: plain numbers
// (and types defined on them), never anything holding a Go pointer, which
// cgo's rules keep out of memory the library or the device sees.
type Numeric interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~int |
		~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uint | ~uintptr |
		~float32 | ~float64 | ~complex64 | ~complex128
}

// Upload copies src to the start of b.
func Upload[T Numeric](b *Buffer, src []T) error {
	if b == nil {
		return closedError("Upload: a nil buffer")
	}
	if len(src) == 0 {
		return b.live()
	}
	n := len(src) * int(unsafe.Sizeof(src[0]))
	return b.CopyFromHost(unsafe.Slice((*byte)(unsafe.Pointer(&src[0])), n))
}

// Download fills dst from the start of b.
func Download[T Numeric](b *Buffer, dst []T) error {
	if b == nil {
		return closedError("Download: a nil buffer")
	}
	if len(dst) == 0 {
		return b.live()
	}
	n := len(dst) * int(unsafe.Sizeof(dst[0]))
	return b.CopyToHost(unsafe.Slice((*byte)(unsafe.Pointer(&dst[0])), n))
}
