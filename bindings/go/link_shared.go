//go:build metrale_shared

package metrale

// Links libmetrale_gpu.so (pkg-config package metrale_gpu), chosen with
// -tags metrale_shared. The program then finds the library at run time
// through LD_LIBRARY_PATH, the system's library path, or an rpath the
// caller adds (CGO_LDFLAGS=-Wl,-rpath,<libdir>).

// #cgo pkg-config: metrale_gpu
import "C"
