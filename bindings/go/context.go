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
	"runtime"
	"sync"
	"unsafe"
)

// Backend selects where a context runs.
type Backend int

const (
	BackendAuto Backend = C.METRALE_BACKEND_AUTO
	BackendCUDA Backend = C.METRALE_BACKEND_CUDA
	BackendHost Backend = C.METRALE_BACKEND_HOST
)

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
	Backend         Backend
	Device          int
	RedzoneBytes    uint64
	RedzoneMinIndex uint64
	CheckedPointers bool
	DebugSync       bool
	LaunchTrace     bool
	KernelTiming    bool
	TraceCapacity   uint64
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
type Context struct {
	mu  sync.RWMutex
	raw *C.metrale_context_t
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
	return &Context{raw: raw}, nil
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
	Name                       string
	ComputeMajor, ComputeMinor int
	SMCount                    int
	TotalMemory                uint64
	Backend                    Backend
	Ordinal                    int
}

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

// callerSite is the file and line `skip` frames above its caller.
func callerSite(skip int) (*C.char, C.int) {
	_, file, line, ok := runtime.Caller(skip + 1)
	if !ok {
		file, line = "?", 0
	}
	return C.CString(file), C.int(line)
}

func freeC(p *C.char) { C.free(unsafe.Pointer(p)) }

// Version is the library's version.
func Version() (major, minor, patch int) {
	var a, b, c C.int
	C.metrale_version(&a, &b, &c)
	return int(a), int(b), int(c)
}
