//go:build !metrale_shared

package testkernels

// Links libmetrale_gpu statically (the default): the pkg-config package
// metrale_gpu_static names libmetrale_gpu.a and the system libraries it
// needs, so the program runs without LD_LIBRARY_PATH or an rpath. Build with
// -tags metrale_shared for libmetrale_gpu.so instead (link_shared.go).

// #cgo pkg-config: metrale_gpu_static
import "C"
