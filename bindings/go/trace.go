package metrale

/*
#include "wrappers.h"
*/
import "C"

// TraceKind says what a launch-trace entry records.
type TraceKind int

// The kinds of metrale_trace_kind_t.
const (
	TraceLaunch TraceKind = C.METRALE_TRACE_LAUNCH // a kernel launch
	TraceD2D    TraceKind = C.METRALE_TRACE_D2D    // a device-to-device copy
	TraceMemset TraceKind = C.METRALE_TRACE_MEMSET // an async memset
)

// String is "launch", "d2d" or "memset".
func (k TraceKind) String() string {
	switch k {
	case TraceLaunch:
		return "launch"
	case TraceD2D:
		return "d2d"
	case TraceMemset:
		return "memset"
	}
	return "unknown"
}

// TraceEntry is one launch-trace entry (EnableLaunchTrace, or the
// LaunchTrace option).
type TraceEntry struct {
	Kind TraceKind // what was recorded
	// Kernel is "module::function" for launches, "" for copies and memsets.
	Kernel      string
	Grid, Block Dim3   // the launch's shape
	SharedBytes uint32 // the launch's dynamic shared memory
	// Args: for launches each parameter's value widened to 64 bits where
	// the kernel's parameter sizes are known, else the first 64 bytes of
	// the packed buffer as words; d2d: src, dst, bytes; memset: ptr,
	// value, bytes.
	Args []uint64
}

func dim3From(d C.metrale_dim3_t) Dim3 { return Dim3{uint32(d.x), uint32(d.y), uint32(d.z)} }

// LaunchTrace copies the launch trace, oldest first.
func (c *Context) LaunchTrace() ([]TraceEntry, error) {
	var out []TraceEntry
	err := readList(c, StatusOK, func(raw *C.metrale_context_t, msg **C.char, o *C.metrale_trace_entry_t, cap C.size_t, n *C.size_t) C.metrale_status_t {
		return C.mg_launch_trace_read(msg, raw, o, cap, n)
	}, func(e *C.metrale_trace_entry_t) {
		t := TraceEntry{Kind: TraceKind(e.kind), Grid: dim3From(e.grid), Block: dim3From(e.block),
			SharedBytes: uint32(e.shared_bytes)}
		if e.kernel != nil {
			t.Kernel = C.GoString(e.kernel)
		}
		n := int(e.nargs)
		if n > len(e.args) {
			n = len(e.args)
		}
		t.Args = make([]uint64, n)
		for i := 0; i < n; i++ {
			t.Args[i] = uint64(e.args[i])
		}
		out = append(out, t)
	})
	return out, err
}
