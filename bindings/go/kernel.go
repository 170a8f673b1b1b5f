package metrale

/*
#include "wrappers.h"
*/
import "C"

import (
	"unsafe"
)

// Dim3 is a grid or block size.
type Dim3 struct {
	X, Y, Z uint32 // the extent in each dimension (each at least 1 for a launch)
}

// D1 is the one-dimensional Dim3{x, 1, 1}.
func D1(x uint32) Dim3 { return Dim3{x, 1, 1} }

func (d Dim3) c() C.metrale_dim3_t {
	return C.metrale_dim3_t{x: C.uint32_t(d.X), y: C.uint32_t(d.Y), z: C.uint32_t(d.Z)}
}

// LoadModuleData loads a module image (PTX, cubin or fatbin) under name
// (cuda backend; ErrUnsupported on the host backend).
func (c *Context) LoadModuleData(name string, image []byte) error {
	if len(image) == 0 {
		return argError("LoadModuleData: the image is empty")
	}
	n := C.CString(name)
	defer freeC(n)
	return c.with(func(raw *C.metrale_context_t) error {
		var msg *C.char
		return result(C.mg_module_load_data(&msg, raw, n, unsafe.Pointer(&image[0]), C.size_t(len(image))), msg)
	})
}

// LoadModuleFile loads a module image from path.
func (c *Context) LoadModuleFile(name, path string) error {
	n, p := C.CString(name), C.CString(path)
	defer freeC(n)
	defer freeC(p)
	return c.with(func(raw *C.metrale_context_t) error {
		var msg *C.char
		return result(C.mg_module_load_file(&msg, raw, n, p), msg)
	})
}

// UnloadModule unloads a module; its kernels then fail with ErrNotFound.
func (c *Context) UnloadModule(name string) error {
	n := C.CString(name)
	defer freeC(n)
	return c.with(func(raw *C.metrale_context_t) error {
		var msg *C.char
		return result(C.mg_module_unload(&msg, raw, n), msg)
	})
}

// HasModule reports whether a module (loaded or registered) has that name.
func (c *Context) HasModule(name string) bool {
	n := C.CString(name)
	defer freeC(n)
	yes := false
	_ = c.with(func(raw *C.metrale_context_t) error {
		yes = C.metrale_has_module(raw, n) == 1
		return nil
	})
	return yes
}

// RegisterHostKernel registers a C function of type metrale_host_kernel_fn
// (pass it as unsafe.Pointer(C.my_kernel)) as module::fn on the host
// backend, with the kernel's parameter sizes in bytes.
func (c *Context) RegisterHostKernel(module, fn string, cfunc unsafe.Pointer, paramSizes []uint64) error {
	if cfunc == nil {
		return argError("RegisterHostKernel: the function pointer is nil")
	}
	m, f := C.CString(module), C.CString(fn)
	defer freeC(m)
	defer freeC(f)
	sizes := (*C.size_t)(C.malloc(C.size_t(len(paramSizes)+1) * C.size_t(unsafe.Sizeof(C.size_t(0)))))
	defer C.free(unsafe.Pointer(sizes))
	arr := unsafe.Slice(sizes, len(paramSizes)+1)
	for i, s := range paramSizes {
		arr[i] = C.size_t(s)
	}
	return c.with(func(raw *C.metrale_context_t) error {
		var msg *C.char
		return result(C.mg_module_register_host_params(&msg, raw, m, f, cfunc, nil, sizes, C.size_t(len(paramSizes))), msg)
	})
}

// Kernel is a kernel handle, owned by its context. Close only makes this
// handle unusable (the context frees the kernel); it is idempotent.
type Kernel struct {
	ctx    *Context
	mu     closeLock
	raw    *C.metrale_kernel_t
	name   string
	closed bool
}

// Kernel looks up module::fn; the kernel audit records the caller's line.
func (c *Context) Kernel(module, fn string) (*Kernel, error) {
	file, line := callerSite(1)
	defer freeC(file)
	m, f := C.CString(module), C.CString(fn)
	defer freeC(m)
	defer freeC(f)
	var k *C.metrale_kernel_t
	err := c.with(func(raw *C.metrale_context_t) error {
		var msg *C.char
		return result(C.mg_kernel_get_at(&msg, raw, m, f, file, line, &k), msg)
	})
	if err != nil {
		return nil, err
	}
	return &Kernel{ctx: c, raw: k, name: module + "::" + fn}, nil
}

// Name is "module::function" ("" for a nil Kernel).
func (k *Kernel) Name() string {
	if k == nil {
		return ""
	}
	return k.name
}

// Close makes the handle unusable; idempotent.
func (k *Kernel) Close() error {
	if k != nil {
		k.mu.Lock()
		k.closed = true
		k.mu.Unlock()
	}
	return nil
}

// LaunchConfig says where and how wide a launch runs.
type LaunchConfig struct {
	Grid, Block Dim3    // blocks in the grid, threads in a block
	SharedBytes uint32  // dynamic shared memory per block
	Stream      *Stream // nil: the default stream
}

// Launch packs args (see Pack) and launches the kernel with their layout,
// which the library checks against the kernel's (see LaunchPackedLayout).
// A Close of a *Buffer argument waits until the library has the launch.
func (k *Kernel) Launch(cfg LaunchConfig, args ...interface{}) error {
	packed, err := Pack(args...)
	if err != nil {
		return err
	}
	var bufs []*Buffer
	var at []uint64
	for i, a := range args {
		if b, ok := a.(*Buffer); ok {
			bufs = append(bufs, b)
			at = append(at, packed.Offsets[i])
		}
	}
	return k.launchLayout(cfg, packed, bufs, at)
}

// LaunchPacked launches with an argument buffer already laid out; the
// library checks its size against the kernel's parameters where known.
// Buffers named only by address in packed are not kept reachable by a
// graph this launch is captured into: keep them yourself.
func (k *Kernel) LaunchPacked(cfg LaunchConfig, packed []byte) error {
	return k.launch(cfg, packed, nil)
}

// launch is LaunchPacked noting bufs for an active capture.
func (k *Kernel) launch(cfg LaunchConfig, packed []byte, bufs []*Buffer) error {
	if k == nil {
		return closedError("a nil kernel")
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	if k.closed {
		return closedError("the kernel")
	}
	// The library reads the arguments during the call only; a C copy keeps
	// Go memory out of anything it might retain.
	var args unsafe.Pointer
	if len(packed) > 0 {
		args = C.CBytes(packed)
		defer C.free(args)
	}
	return cfg.Stream.use(k.ctx, func(raw *C.metrale_context_t, st *C.metrale_stream_t) error {
		var msg *C.char
		if err := result(C.mg_launch_packed(&msg, raw, k.raw, cfg.Grid.c(), cfg.Block.c(),
			C.uint32_t(cfg.SharedBytes), st, args, C.size_t(len(packed))), msg); err != nil {
			return err
		}
		if len(bufs) > 0 {
			k.ctx.noteCaptured(raw, st, bufs...)
		}
		return nil
	})
}
