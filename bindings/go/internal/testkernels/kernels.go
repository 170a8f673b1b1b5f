// Package testkernels holds host-backend kernels for the tests (test files
// cannot use cgo themselves): C equivalents of tests/kernels/test_kernels.cu,
// whose fatbin the tests load instead on the cuda backend.
package testkernels

/*
#include <metrale_gpu.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

static metrale_status_t fill_u32(const metrale_host_kernel_call_t* call, void* user) {
  (void)user;
  uint32_t* p = *(uint32_t* const*)call->params[0];
  uint32_t value = *(const uint32_t*)call->params[1];
  uint64_t n = *(const uint64_t*)call->params[2];
  for (uint64_t i = 0; i < n; i++) p[i] = value;
  return METRALE_OK;
}

static metrale_status_t overflow_write(const metrale_host_kernel_call_t* call, void* user) {
  (void)user;
  uint8_t* p = *(uint8_t* const*)call->params[0];
  uint64_t end = *(const uint64_t*)call->params[1] + *(const uint64_t*)call->params[2];
  uint32_t value = *(const uint32_t*)call->params[3];
  for (uint64_t i = 0; i < end; i++) p[i] = (uint8_t)value;
  return METRALE_OK;
}

static metrale_status_t mixed_params(const metrale_host_kernel_call_t* call, void* user) {
  (void)user;
  uint64_t* out = *(uint64_t* const*)call->params[7];
  double e = *(const float*)call->params[4];
  double f = *(const double*)call->params[5];
  out[0] = *(const uint8_t*)call->params[0];
  out[1] = *(const uint16_t*)call->params[1];
  out[2] = *(const uint32_t*)call->params[2];
  out[3] = *(const uint64_t*)call->params[3];
  memcpy(&out[4], &e, 8);
  memcpy(&out[5], &f, 8);
  out[6] = (uint64_t)(int64_t)*(const int8_t*)call->params[6];
  return METRALE_OK;
}

static atomic_int slow_fill_state; // 0 idle, 1 running, 2 done

// slow_fill(uint8_t* p, uint32_t value, uint64_t n): says it started,
// sleeps 200 ms (long enough for a Close on another goroutine to act),
// writes n bytes of value, then says it is done.
static metrale_status_t slow_fill(const metrale_host_kernel_call_t* call, void* user) {
  (void)user;
  uint8_t* p = *(uint8_t* const*)call->params[0];
  uint32_t value = *(const uint32_t*)call->params[1];
  uint64_t n = *(const uint64_t*)call->params[2];
  atomic_store(&slow_fill_state, 1);
  usleep(200000);
  memset(p, (int)(uint8_t)value, n);
  atomic_store(&slow_fill_state, 2);
  return METRALE_OK;
}

static void* fill_u32_ptr(void) { return (void*)fill_u32; }
static void* slow_fill_ptr(void) { return (void*)slow_fill; }
static int slow_fill_get(void) { return atomic_load(&slow_fill_state); }
static void slow_fill_reset(void) { atomic_store(&slow_fill_state, 0); }
static void* overflow_write_ptr(void) { return (void*)overflow_write; }
static void* mixed_params_ptr(void) { return (void*)mixed_params; }
*/
import "C"

import "unsafe"

// FillU32 is fill_u32(uint32_t* p, uint32_t value, uint64_t n); sizes 8, 4, 8.
func FillU32() unsafe.Pointer { return C.fill_u32_ptr() }

// OverflowWrite is overflow_write(uint8_t* p, uint64_t bytes, uint64_t extra,
// uint32_t value): writes p[0 .. bytes+extra), the planted overflow.
func OverflowWrite() unsafe.Pointer { return C.overflow_write_ptr() }

// MixedParams is mixed_params(u8, u16, u32, u64, f32, f64, i8, u64* out).
func MixedParams() unsafe.Pointer { return C.mixed_params_ptr() }

// SlowFill is slow_fill(uint8_t* p, uint32_t value, uint64_t n), sizes
// 8, 4, 8 (parameters after these are ignored): sleeps 200 ms, then writes
// n bytes of value at p.
func SlowFill() unsafe.Pointer { return C.slow_fill_ptr() }

// SlowFillStarted reports whether slow_fill began since SlowFillReset.
func SlowFillStarted() bool { return C.slow_fill_get() >= 1 }

// SlowFillDone reports whether slow_fill returned since SlowFillReset.
func SlowFillDone() bool { return C.slow_fill_get() == 2 }

// SlowFillReset clears SlowFillStarted and SlowFillDone.
func SlowFillReset() { C.slow_fill_reset() }

// FillU32Sizes and MixedParamsSizes are the kernels' parameter sizes.
var (
	FillU32Sizes       = []uint64{8, 4, 8}
	OverflowWriteSizes = []uint64{8, 8, 8, 4}
	MixedParamsSizes   = []uint64{1, 2, 4, 8, 4, 8, 1, 8}
)
