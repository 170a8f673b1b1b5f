package metrale

/*
#include "wrappers.h"
*/
import "C"

import "unsafe"

// Allocation is one live ledger entry.
type Allocation struct {
	Ptr          DevPtr // what the caller got
	Bytes        uint64 // what the caller asked for
	Seq          uint64 // the red-zone creation index (see the header)
	File         string // the allocation site, relative to its module root (see Site)
	Line         int    // its line
	Managed      bool   // managed (unified) memory
	RedzoneBytes uint64 // the pad after the buffer (0 = none)
}

// RedzoneOffsetUnknown is FirstBadOffset when the bad bytes a check counted
// were rewritten before they could be read back (Found is 0 then).
const RedzoneOffsetUnknown = ^uint64(0)

// RedzoneViolation is one overwritten red-zone pad.
type RedzoneViolation struct {
	Ptr            DevPtr // the allocation's pointer
	Bytes          uint64 // its size as asked
	Seq            uint64 // its red-zone creation index
	File           string // its allocation site
	Line           int    // its line
	FirstBadOffset uint64 // from the end of the buffer; RedzoneOffsetUnknown: rewritten before read back
	BadBytes       uint64 // pad bytes that differ from the pattern
	Expected       byte   // the pattern byte (0xA5)
	Found          byte   // what the first bad byte holds
}

// Counters are the context's telemetry counters, one field per field of
// metrale_counters_t, in its order (a test checks that they match).
type Counters struct {
	Launches           uint64 // kernel launches, graph replays not included
	GraphLaunches      uint64 // graph replays
	StreamSyncs        uint64 // stream synchronizes and the library's own waits
	H2DCopies          uint64 // host-to-device copies
	H2DBytes           uint64 // bytes they moved
	D2HCopies          uint64 // device-to-host copies
	D2HBytes           uint64 // bytes they moved
	D2DCopies          uint64 // device-to-device copies (2D ones too)
	D2DBytes           uint64 // bytes they moved (width*height for 2D)
	Memsets            uint64 // memsets, sync and async
	MemsetBytes        uint64 // bytes they set
	Allocs             uint64 // ledger allocations (device and managed)
	AllocBytes         uint64 // bytes asked by them
	Frees              uint64 // ledger frees (sweeps included)
	FreeBytes          uint64 // bytes they gave back
	KernelLookups      uint64 // Context.Kernel calls
	KernelLookupMisses uint64 // those that found no kernel
	PinnedWaits        uint64 // async host-to-device copies that waited for a pinned source
	TimingsDropped     uint64 // launches left untimed by the timing caps
}

// countersCWords is how many uint64 counters metrale_counters_t holds
// after struct_size, for the test that keeps Counters in step with it.
func countersCWords() int {
	var k C.metrale_counters_t
	return int((unsafe.Sizeof(k) - unsafe.Sizeof(k.struct_size)) / unsafe.Sizeof(k.launches))
}

// KernelAuditEntry is one kernel lookup, found or not.
type KernelAuditEntry struct {
	Module, Function string // the names looked up
	Found            bool   // whether the lookup found a kernel
	File             string // the lookup's site
	Line             int    // its line
}

// readList does a size query then a read, again if the list grew between.
// okAlso is a status that still fills the list (the red-zone scan's).
func readList[T any](c *Context, okAlso Status, call func(raw *C.metrale_context_t, msg **C.char, out *T, cap C.size_t, n *C.size_t) C.metrale_status_t, conv func(*T)) error {
	return c.with(func(raw *C.metrale_context_t) error {
		for {
			var n C.size_t
			var msg *C.char
			st := call(raw, &msg, nil, 0, &n)
			if err := result(st, msg); err != nil && Status(st) != okAlso {
				return err
			}
			buf := make([]T, int(n)+1)
			var got C.size_t
			st = call(raw, &msg, &buf[0], n, &got)
			err := result(st, msg)
			if Status(st) == ErrBufferTooSmall {
				continue
			}
			if err != nil && Status(st) != okAlso {
				return err
			}
			if got > n {
				got = n
			}
			for i := 0; i < int(got); i++ {
				conv(&buf[i])
			}
			return nil
		}
	})
}

// LiveAllocations lists live ledger allocations, oldest first.
func (c *Context) LiveAllocations() ([]Allocation, error) {
	var out []Allocation
	err := readList(c, StatusOK, func(raw *C.metrale_context_t, msg **C.char, o *C.metrale_allocation_t, cap C.size_t, n *C.size_t) C.metrale_status_t {
		return C.mg_live_allocations(msg, raw, o, cap, n)
	}, func(a *C.metrale_allocation_t) {
		out = append(out, Allocation{DevPtr(a.ptr), uint64(a.bytes), uint64(a.seq), C.GoString(a.file), int(a.line),
			a.kind == C.METRALE_ALLOC_MANAGED, uint64(a.redzone_bytes)})
	})
	return out, err
}

// RedzoneScan checks every pad. Overwritten pads come back as values with
// a nil error; an empty list means none.
func (c *Context) RedzoneScan() ([]RedzoneViolation, error) {
	var out []RedzoneViolation
	err := readList(c, ErrRedzoneCorrupted, func(raw *C.metrale_context_t, msg **C.char, o *C.metrale_redzone_violation_t, cap C.size_t, n *C.size_t) C.metrale_status_t {
		return C.mg_redzone_scan(msg, raw, o, cap, n)
	}, func(v *C.metrale_redzone_violation_t) {
		out = append(out, RedzoneViolation{DevPtr(v.ptr), uint64(v.bytes), uint64(v.seq), C.GoString(v.file), int(v.line),
			uint64(v.first_bad_offset), uint64(v.bad_bytes), byte(v.expected), byte(v.found)})
	})
	return out, err
}

// RedzonePoison refills the pads of live allocations with seq in [lo, hi).
func (c *Context) RedzonePoison(lo, hi uint64) error {
	return c.with(func(raw *C.metrale_context_t) error {
		var msg *C.char
		return result(C.mg_redzone_poison(&msg, raw, C.uint64_t(lo), C.uint64_t(hi)), msg)
	})
}

// KernelAudit lists every kernel lookup with the caller's site.
func (c *Context) KernelAudit() ([]KernelAuditEntry, error) {
	var out []KernelAuditEntry
	err := readList(c, StatusOK, func(raw *C.metrale_context_t, msg **C.char, o *C.metrale_kernel_audit_entry_t, cap C.size_t, n *C.size_t) C.metrale_status_t {
		return C.mg_kernel_audit_read(msg, raw, o, cap, n)
	}, func(e *C.metrale_kernel_audit_entry_t) {
		out = append(out, KernelAuditEntry{C.GoString(e.module), C.GoString(e.function), e.found != 0, C.GoString(e.file), int(e.line)})
	})
	return out, err
}

// AllocReport is the text report of live bytes by site, largest first
// (topN 0 = all sites, minMiB 0 = any size), then a total line.
func (c *Context) AllocReport(topN, minMiB uint64) (string, error) {
	var out string
	err := c.with(func(raw *C.metrale_context_t) error {
		for {
			var need C.size_t
			var msg *C.char
			if err := result(C.mg_alloc_report(&msg, raw, C.size_t(topN), C.size_t(minMiB), nil, 0, &need), msg); err != nil {
				return err
			}
			buf := (*C.char)(C.malloc(need + 1))
			st := C.mg_alloc_report(&msg, raw, C.size_t(topN), C.size_t(minMiB), buf, need+1, &need)
			if Status(st) == ErrBufferTooSmall {
				C.free(unsafe.Pointer(buf))
				C.free(unsafe.Pointer(msg))
				continue
			}
			err := result(st, msg)
			if err == nil {
				out = C.GoString(buf)
			}
			C.free(unsafe.Pointer(buf))
			return err
		}
	})
	return out, err
}

func (c *Context) sizeQuery(call func(raw *C.metrale_context_t, msg **C.char, n *C.size_t) C.metrale_status_t) (uint64, error) {
	var n C.size_t
	err := c.with(func(raw *C.metrale_context_t) error {
		var msg *C.char
		return result(call(raw, &msg, &n), msg)
	})
	return uint64(n), err
}

// LiveBytes is the bytes (as asked) of live ledger allocations.
func (c *Context) LiveBytes() (uint64, error) {
	return c.sizeQuery(func(r *C.metrale_context_t, m **C.char, n *C.size_t) C.metrale_status_t {
		return C.mg_live_bytes(m, r, n)
	})
}

// LiveCount is the number of live ledger allocations.
func (c *Context) LiveCount() (uint64, error) {
	return c.sizeQuery(func(r *C.metrale_context_t, m **C.char, n *C.size_t) C.metrale_status_t {
		return C.mg_live_count(m, r, n)
	})
}

// ChunkSlackBytes is what size rounding reserves beyond what was asked.
func (c *Context) ChunkSlackBytes() (uint64, error) {
	return c.sizeQuery(func(r *C.metrale_context_t, m **C.char, n *C.size_t) C.metrale_status_t {
		return C.mg_chunk_slack_bytes(m, r, n)
	})
}

// SweepUnreleased frees every live ledger allocation that no open Buffer
// owns (made through C, or left by a finalizer that could not free it),
// logs their sites and says how many there were. While any Buffer of this
// context is open (not closed, nor finalized) it frees nothing and returns
// an error matching ErrInvalidArgument: the sweep would free memory the
// Buffer still uses, and the pool would hand it to the next Alloc too.
// Close the Buffers first; Context.Close frees and names everything.
// Allocations on the context wait for a sweep to return, so a log callback
// must not allocate on it from a line the sweep logs (it would wait forever).
func (c *Context) SweepUnreleased() (uint64, error) {
	if c == nil {
		return 0, closedError("a nil context")
	}
	c.sweepGate.Lock()
	defer c.sweepGate.Unlock()
	if n := c.buffers.Load(); n > 0 {
		return 0, argError("SweepUnreleased: %d Buffer(s) of this context are still open; "+
			"the sweep frees only memory no Buffer owns (close them first)", n)
	}
	return c.sizeQuery(func(r *C.metrale_context_t, m **C.char, n *C.size_t) C.metrale_status_t {
		return C.mg_sweep_unreleased(m, r, n)
	})
}

// TotalMemory is the device's total memory.
func (c *Context) TotalMemory() (uint64, error) {
	return c.sizeQuery(func(r *C.metrale_context_t, m **C.char, n *C.size_t) C.metrale_status_t {
		return C.mg_total_memory(m, r, n)
	})
}

// FreeMemory is what this context can still get.
func (c *Context) FreeMemory() (uint64, error) {
	return c.sizeQuery(func(r *C.metrale_context_t, m **C.char, n *C.size_t) C.metrale_status_t {
		return C.mg_free_memory(m, r, n)
	})
}

// Counters reads the telemetry counters.
func (c *Context) Counters() (Counters, error) {
	var k C.metrale_counters_t
	err := c.with(func(raw *C.metrale_context_t) error {
		var msg *C.char
		return result(C.mg_counters(&msg, raw, &k), msg)
	})
	u := func(v C.uint64_t) uint64 { return uint64(v) }
	return Counters{
		Launches: u(k.launches), GraphLaunches: u(k.graph_launches), StreamSyncs: u(k.stream_syncs),
		H2DCopies: u(k.h2d_copies), H2DBytes: u(k.h2d_bytes), D2HCopies: u(k.d2h_copies), D2HBytes: u(k.d2h_bytes),
		D2DCopies: u(k.d2d_copies), D2DBytes: u(k.d2d_bytes), Memsets: u(k.memsets), MemsetBytes: u(k.memset_bytes),
		Allocs: u(k.allocs), AllocBytes: u(k.alloc_bytes), Frees: u(k.frees), FreeBytes: u(k.free_bytes),
		KernelLookups: u(k.kernel_lookups), KernelLookupMisses: u(k.kernel_lookup_misses), PinnedWaits: u(k.pinned_source_waits),
		TimingsDropped: u(k.timings_dropped),
	}, err
}

// ResetCounters zeroes the counters.
func (c *Context) ResetCounters() error {
	return c.with(func(raw *C.metrale_context_t) error {
		var msg *C.char
		return result(C.mg_counters_reset(&msg, raw), msg)
	})
}

// EnableLaunchTrace turns the launch trace on (clearing it) or off.
func (c *Context) EnableLaunchTrace(on bool) error {
	return c.with(func(raw *C.metrale_context_t) error {
		var msg *C.char
		return result(C.mg_launch_trace_enable(&msg, raw, cbool(on)), msg)
	})
}

// LaunchTraceLen is the number of launch-trace entries held.
func (c *Context) LaunchTraceLen() (uint64, error) {
	return c.sizeQuery(func(r *C.metrale_context_t, m **C.char, n *C.size_t) C.metrale_status_t {
		return C.mg_launch_trace_read(m, r, nil, 0, n)
	})
}
