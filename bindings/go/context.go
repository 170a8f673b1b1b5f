// Package metrale is the Go binding of libmetrale_gpu: a GPU runtime whose
// allocation ledger names the Go line holding each buffer, whose red zones
// catch kernels writing past their buffers, and whose errors carry the
// library's message.
//
// Every handle has an idempotent Close; using a handle after it (or its
// context) was closed returns an error matching ErrClosed, never a crash.
package metrale

/*
#include "wrappers.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Backend selects where a context runs.
type Backend int

// The backends of metrale_backend_t.
const (
	BackendAuto Backend = C.METRALE_BACKEND_AUTO // cuda when a device answers, else host
	BackendCUDA Backend = C.METRALE_BACKEND_CUDA // the CUDA driver, loaded at run time
	BackendHost Backend = C.METRALE_BACKEND_HOST // host memory and C host kernels, anywhere
)

// String is the backend's METRALE_BACKEND name: "auto", "cuda" or "host".
func (b Backend) String() string {
	switch b {
	case BackendCUDA:
		return "cuda"
	case BackendHost:
		return "host"
	}
	return "auto"
}

// Options for NewContext. Start from DefaultOptions(); environment
// variables (METRALE_BACKEND, METRALE_REDZONE, ...) override them.
type Options struct {
	Backend         Backend // where the context runs (METRALE_BACKEND)
	Device          int     // the CUDA device ordinal (METRALE_DEVICE)
	RedzoneBytes    uint64  // pad after each allocation, 0 = none (METRALE_REDZONE)
	RedzoneMinIndex uint64  // pad only allocations from this seq on (METRALE_REDZONE_MIN_IDX)
	CheckedPointers bool    // range-check copies and memsets (METRALE_CHECKED)
	DebugSync       bool    // synchronize after every launch (METRALE_DEBUG_SYNC)
	LaunchTrace     bool    // record launches, d2d copies and memsets (METRALE_LAUNCH_TRACE)
	KernelTiming    bool    // time every launch (METRALE_KERNEL_TIMING)
	TraceCapacity   uint64  // entries the launch trace and kernel audit keep
}

// DefaultOptions returns the library's defaults.
func DefaultOptions() Options {
	var o C.metrale_context_options_t
	C.metrale_context_options_init_sized(&o, C.size_t(unsafe.Sizeof(o)))
	return Options{
		Backend:         Backend(o.backend),
		Device:          int(o.device),
		RedzoneBytes:    uint64(o.redzone_bytes),
		RedzoneMinIndex: uint64(o.redzone_min_index),
		CheckedPointers: o.checked_pointers != 0,
		DebugSync:       o.debug_sync != 0,
		LaunchTrace:     o.launch_trace != 0,
		KernelTiming:    o.kernel_timing != 0,
		TraceCapacity:   uint64(o.trace_capacity),
	}
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// Context is a device context. Close destroys it: the library frees what is
// still allocated and logs the sites.
//
// A Context never closed is destroyed by a finalizer once unreachable (its
// handles keep it reachable), with a warning naming where it was made.
type Context struct {
	mu  closeLock
	raw *C.metrale_context_t

	file string // where NewContext was called, for the finalizer's warning
	line int

	// aux guards what the binding keeps beside the C context: the live
	// streams (finalizers wait for them) and the buffers each active
	// capture recorded (the graph keeps them reachable).
	aux      sync.Mutex
	streams  map[*C.metrale_stream_t]struct{}
	captures map[*C.metrale_stream_t][]*Buffer

	// buffers counts the Buffers not yet closed (nor finalized), which
	// SweepUnreleased must not free under. sweepGate is held for reading
	// while a Buffer is allocated and counted, for writing while a sweep
	// checks the count and runs: an allocation on another goroutine
	// meanwhile is never swept before its Buffer is counted.
	buffers   atomic.Int64
	sweepGate sync.RWMutex

	// pinnedLeaked counts PinnedBuffers finalized without Close: slices
	// from their Bytes may still be in use, so the finalizer never
	// destroys this context (that would free their memory under them).
	pinnedLeaked atomic.Int64
}

// NewContext creates a context; opts nil means DefaultOptions().
func NewContext(opts *Options) (*Context, error) {
	var o C.metrale_context_options_t
	C.metrale_context_options_init_sized(&o, C.size_t(unsafe.Sizeof(o)))
	if opts != nil {
		o.backend = C.metrale_backend_t(opts.Backend)
		o.device = C.int(opts.Device)
		o.redzone_bytes = C.size_t(opts.RedzoneBytes)
		o.redzone_min_index = C.uint64_t(opts.RedzoneMinIndex)
		o.checked_pointers = cbool(opts.CheckedPointers)
		o.debug_sync = cbool(opts.DebugSync)
		o.launch_trace = cbool(opts.LaunchTrace)
		o.kernel_timing = cbool(opts.KernelTiming)
		o.trace_capacity = C.size_t(opts.TraceCapacity)
	}
	var raw *C.metrale_context_t
	var msg *C.char
	if err := result(C.mg_context_create(&msg, &o, &raw), msg); err != nil {
		return nil, err
	}
	c := &Context{raw: raw}
	c.file, c.line = Site(1)
	runtime.SetFinalizer(c, (*Context).finalize)
	return c, nil
}

// finalize destroys a context that became unreachable without Close.
func (c *Context) finalize() {
	if c.raw == nil {
		return
	}
	if n := c.pinnedLeaked.Load(); n > 0 {
		logLeak("a Context", c.file, c.line, fmt.Sprintf("not destroyed: %d PinnedBuffer(s) of it "+
			"were never closed, and slices from their Bytes may still use the memory", n))
		return
	}
	var msg *C.char
	err := result(C.mg_context_destroy(&msg, c.raw), msg)
	c.raw = nil
	outcome := "the garbage collector destroyed it"
	if err != nil {
		outcome = fmt.Sprintf("the garbage collector could not destroy it: %v", err)
	}
	logLeak("a Context", c.file, c.line, outcome)
}

// with runs f with the live context; Close waits for it to return.
func (c *Context) with(f func(raw *C.metrale_context_t) error) error {
	if c == nil {
		return closedError("a nil context")
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.raw == nil {
		return closedError("the context")
	}
	return f(c.raw)
}

// Close destroys the context; later calls on it or its handles return
// errors matching ErrClosed. Closing twice returns nil.
func (c *Context) Close() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.raw == nil {
		return nil
	}
	var msg *C.char
	err := result(C.mg_context_destroy(&msg, c.raw), msg)
	c.raw = nil
	runtime.SetFinalizer(c, nil)
	return err
}

// Backend is the backend the context runs on (BackendAuto once closed).
func (c *Context) Backend() Backend {
	b := BackendAuto
	_ = c.with(func(raw *C.metrale_context_t) error {
		b = Backend(C.metrale_context_backend(raw))
		return nil
	})
	return b
}

// Fault is nil while the context is healthy, ErrContextLost once a sticky
// device fault was latched.
func (c *Context) Fault() error {
	return c.with(func(raw *C.metrale_context_t) error {
		var msg *C.char
		return result(C.mg_context_fault(&msg, raw), msg)
	})
}

// BindThread makes the device context current on the calling OS thread;
// pair it with runtime.LockOSThread before calling the driver directly.
func (c *Context) BindThread() error {
	return c.with(func(raw *C.metrale_context_t) error {
		var msg *C.char
		return result(C.mg_context_bind_thread(&msg, raw), msg)
	})
}

// Synchronize waits for the default stream.
func (c *Context) Synchronize() error {
	return c.with(func(raw *C.metrale_context_t) error {
		var msg *C.char
		return result(C.mg_stream_synchronize(&msg, raw, nil), msg)
	})
}

// DeviceInfo describes the device (or the host, on the host backend).
type DeviceInfo struct {
	Name                       string  // the device's (or the host's) name
	ComputeMajor, ComputeMinor int     // compute capability; 0.0 on the host backend
	SMCount                    int     // multiprocessors; CPUs on the host backend
	TotalMemory                uint64  // bytes of device memory (host RAM on host)
	Backend                    Backend // the backend the context runs on
	Ordinal                    int     // the device ordinal
}

// DeviceInfo describes the context's device.
func (c *Context) DeviceInfo() (DeviceInfo, error) {
	var d DeviceInfo
	err := c.with(func(raw *C.metrale_context_t) error {
		var i C.metrale_device_info_t
		var msg *C.char
		if err := result(C.mg_device_info(&msg, raw, &i), msg); err != nil {
			return err
		}
		d = DeviceInfo{
			Name:         C.GoString(&i.name[0]),
			ComputeMajor: int(i.compute_major), ComputeMinor: int(i.compute_minor),
			SMCount: int(i.sm_count), TotalMemory: uint64(i.total_memory),
			Backend: Backend(i.backend), Ordinal: int(i.ordinal),
		}
		return nil
	})
	return d, err
}

func freeC(p *C.char) { C.free(unsafe.Pointer(p)) }

// Version is the library's version.
func Version() (major, minor, patch int) {
	var a, b, c C.int
	C.metrale_version(&a, &b, &c)
	return int(a), int(b), int(c)
}
