package metrale

/*
#include "pack_wrappers.h"
*/
import "C"

import (
	"reflect"
	"unsafe"
)

// The packing rule is the library's, documented once in metrale_gpu.h under
// "Kernel parameter layout": the arguments in order, each at the next offset
// that is a multiple of its natural alignment (reflect.Type.Align, which is
// C's alignof for these types on 64-bit platforms; an array aligns like its
// element, a struct like its most aligned field), nothing after the last.
// It is the layout nvcc gives a kernel's parameters.

// Param is one kernel parameter's size and alignment in bytes.
type Param struct {
	Size  uint64 // bytes
	Align uint64 // a power of two that divides Size
}

// Packed is an argument buffer laid out by the packing rule, with each
// argument's offset and size in Bytes.
type Packed struct {
	Bytes   []byte   // the argument buffer
	Offsets []uint64 // where each argument starts in Bytes
	Sizes   []uint64 // each argument's size in bytes
}

// Pack lays args out by the packing rule. Accepted: bool, the sized integer
// and float types, int, uint, uintptr (8 bytes), DevPtr and *Buffer (its
// device pointer, 8 bytes), and arrays and structs made only of these
// (passed by value; a struct as a C struct with the same fields in the same
// order). Refused: pointers, strings, slices, maps, interfaces, complex
// numbers, zero-size types, a nil or closed *Buffer.
func Pack(args ...interface{}) (Packed, error) {
	p := Packed{Bytes: make([]byte, 0, 8*len(args))}
	for i, a := range args {
		value, align, err := argBytes(i, a)
		if err != nil {
			return Packed{}, err
		}
		offset := (uint64(len(p.Bytes)) + align - 1) &^ (align - 1)
		for uint64(len(p.Bytes)) < offset {
			p.Bytes = append(p.Bytes, 0)
		}
		p.Bytes = append(p.Bytes, value...)
		p.Offsets = append(p.Offsets, offset)
		p.Sizes = append(p.Sizes, uint64(len(value)))
	}
	return p, nil
}

// PackArgs is Pack's buffer alone.
func PackArgs(args ...interface{}) ([]byte, error) {
	p, err := Pack(args...)
	return p.Bytes, err
}

// ParamsOf gives each argument's size and alignment as Pack lays it out:
// the params of RegisterHostKernelLayout for a kernel launched with
// arguments of these types. A nil *Buffer counts as a device pointer here.
func ParamsOf(args ...interface{}) ([]Param, error) {
	params := make([]Param, len(args))
	for i, a := range args {
		if b, ok := a.(*Buffer); ok && b == nil {
			params[i] = Param{8, 8} // only its type matters here
			continue
		}
		value, align, err := argBytes(i, a)
		if err != nil {
			return nil, err
		}
		params[i] = Param{uint64(len(value)), align}
	}
	return params, nil
}

// argBytes is argument i's bytes (a copy) and alignment.
func argBytes(i int, a interface{}) ([]byte, uint64, error) {
	if b, ok := a.(*Buffer); ok {
		if b == nil {
			return nil, 0, argError("argument %d: a nil *Buffer", i)
		}
		p := b.Ptr()
		if p == 0 {
			return nil, 0, argError("argument %d: a closed buffer", i)
		}
		a = uint64(p)
	}
	if a == nil {
		return nil, 0, argError("argument %d is nil", i)
	}
	t := reflect.TypeOf(a)
	if why := notPlain(t); why != "" {
		return nil, 0, argError("argument %d: type %v cannot be a kernel argument (%s)", i, t, why)
	}
	// A copy of the value in memory of its own type, read as bytes: the
	// layout Go gives it, which for these types is C's.
	v := reflect.New(t)
	v.Elem().Set(reflect.ValueOf(a))
	raw := unsafe.Slice((*byte)(v.UnsafePointer()), t.Size())
	return append([]byte(nil), raw...), uint64(t.Align()), nil
}

// notPlain says why t is not plain data with C's layout ("" when it is).
func notPlain(t reflect.Type) string {
	if t.Size() == 0 {
		return "zero size"
	}
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		return ""
	case reflect.Array:
		return notPlain(t.Elem())
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if why := notPlain(t.Field(i).Type); why != "" {
				return "field " + t.Field(i).Name + ": " + why
			}
		}
		return ""
	case reflect.Complex64, reflect.Complex128:
		return "complex numbers align differently in CUDA; pass a struct of two floats"
	default:
		return "a " + t.Kind().String() + " is not plain data"
	}
}

// RegisterHostKernelLayout registers a C function of type
// metrale_host_kernel_fn as module::fn on the host backend with each
// parameter's size and alignment (ParamsOf gives them from sample
// arguments): the library lays them out by the packing rule, as nvcc does
// the same kernel. Prefer it to RegisterHostKernel, which infers each
// alignment from the size and is wrong for arrays and structs ([2]uint16
// aligns to 2, not 4): launches then fail with ErrInvalidArgument instead.
func (c *Context) RegisterHostKernelLayout(module, fn string, cfunc unsafe.Pointer, params []Param) error {
	if cfunc == nil {
		return argError("RegisterHostKernelLayout: the function pointer is nil")
	}
	m, f := C.CString(module), C.CString(fn)
	defer freeC(m)
	defer freeC(f)
	sizes, aligns := cSizes(len(params)), cSizes(len(params))
	defer C.free(unsafe.Pointer(sizes))
	defer C.free(unsafe.Pointer(aligns))
	s, a := unsafe.Slice(sizes, len(params)+1), unsafe.Slice(aligns, len(params)+1)
	for i, p := range params {
		s[i], a[i] = C.size_t(p.Size), C.size_t(p.Align)
	}
	return c.with(func(raw *C.metrale_context_t) error {
		var msg *C.char
		return result(C.mg_module_register_host_layout(&msg, raw, m, f, cfunc, nil, sizes, aligns, C.size_t(len(params))), msg)
	})
}

// cSizes is C memory for n size_t values (one more, so never empty).
func cSizes(n int) *C.size_t {
	return (*C.size_t)(C.calloc(C.size_t(n+1), C.size_t(unsafe.Sizeof(C.size_t(0)))))
}

// ParamLayout is the kernel's parameters' offsets and sizes as the library
// knows them (a host kernel's registration, or the driver's
// cuFuncGetParamInfo). ErrUnsupported when unknown: a host kernel
// registered without sizes, or a driver older than 12.4.
func (k *Kernel) ParamLayout() (offsets, sizes []uint64, err error) {
	err = k.useKernel(func(raw *C.metrale_context_t) error {
		var msg *C.char
		var n C.size_t
		if err := result(C.mg_kernel_param_layout(&msg, raw, k.raw, nil, nil, 0, &n), msg); err != nil {
			return err
		}
		o, s := cSizes(int(n)), cSizes(int(n))
		defer C.free(unsafe.Pointer(o))
		defer C.free(unsafe.Pointer(s))
		if n > 0 {
			if err := result(C.mg_kernel_param_layout(&msg, raw, k.raw, o, s, n, &n), msg); err != nil {
				return err
			}
		}
		os, ss := unsafe.Slice(o, int(n)), unsafe.Slice(s, int(n))
		for i := range os {
			offsets = append(offsets, uint64(os[i]))
			sizes = append(sizes, uint64(ss[i]))
		}
		return nil
	})
	return offsets, sizes, err
}

// useKernel runs f on the kernel's context unless the kernel is nil or closed.
func (k *Kernel) useKernel(f func(raw *C.metrale_context_t) error) error {
	if k == nil {
		return closedError("a nil kernel")
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	if k.closed {
		return closedError("the kernel")
	}
	return k.ctx.with(f)
}

// LaunchPackedLayout launches with arguments packed by Pack: the library
// checks each argument's offset and size against the kernel's parameters
// where it knows them (ErrInvalidArgument naming the first that differs,
// nothing launched). Launch goes through it.
func (k *Kernel) LaunchPackedLayout(cfg LaunchConfig, p Packed) error {
	return k.launchLayout(cfg, p, nil, nil)
}

// launchLayout is LaunchPackedLayout noting bufs for an active capture (the
// graph keeps them reachable). Each of bufs is held until the library
// returns, and its pointer written again at its offset in at (Pack read it
// without holding it): a Close meanwhile would free memory the kernel runs
// on, so it waits, or the launch fails with ErrClosed.
func (k *Kernel) launchLayout(cfg LaunchConfig, p Packed, bufs []*Buffer, at []uint64) error {
	if k == nil {
		return closedError("a nil kernel")
	}
	if len(p.Offsets) != len(p.Sizes) {
		return argError("LaunchPackedLayout: %d offsets but %d sizes", len(p.Offsets), len(p.Sizes))
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	if k.closed {
		return closedError("the kernel")
	}
	// C copies: the library reads them during the call only, and Go memory
	// stays out of anything it might keep.
	var args unsafe.Pointer
	if len(p.Bytes) > 0 {
		args = C.CBytes(p.Bytes)
		defer C.free(args)
	}
	n := len(p.Offsets)
	offsets, sizes := cSizes(n), cSizes(n)
	defer C.free(unsafe.Pointer(offsets))
	defer C.free(unsafe.Pointer(sizes))
	o, s := unsafe.Slice(offsets, n+1), unsafe.Slice(sizes, n+1)
	for i := 0; i < n; i++ {
		o[i], s[i] = C.size_t(p.Offsets[i]), C.size_t(p.Sizes[i])
	}
	// The stream, then the buffers, then the context: Buffer.withStream's order.
	st, releaseS, err := cfg.Stream.hold(k.ctx)
	if err != nil {
		return err
	}
	defer releaseS()
	ptrs, releaseB, err := holdBuffers(bufs)
	if err != nil {
		return err
	}
	defer releaseB()
	for i, ptr := range ptrs {
		*(*C.metrale_devptr_t)(unsafe.Add(args, at[i])) = ptr
	}
	return k.ctx.with(func(raw *C.metrale_context_t) error {
		var msg *C.char
		if err := result(C.mg_launch_packed_layout(&msg, raw, k.raw, cfg.Grid.c(), cfg.Block.c(),
			C.uint32_t(cfg.SharedBytes), st, args, C.size_t(len(p.Bytes)), offsets, sizes, C.size_t(n)), msg); err != nil {
			return err
		}
		if len(bufs) > 0 {
			k.ctx.noteCaptured(raw, st, bufs...)
		}
		return nil
	})
}
