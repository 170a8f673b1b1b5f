package testkernels

/*
#cgo pkg-config: metrale_gpu
#include <metrale_gpu.h>
#include <stdint.h>
#include <string.h>

// Host twins of the layout_* kernels of tests/kernels/test_kernels.cu: each
// writes back what it received, one uint64_t per value, floats as bits.
typedef struct { uint16_t v[2]; } layout_u16x2;
typedef struct { uint16_t a; uint8_t b[2]; float c; } layout_sv;

#define LARG(call, i, type) (*(type const*)(call)->params[(i)])

static uint64_t layout_fbits(float f) { uint32_t b; memcpy(&b, &f, 4); return b; }

static metrale_status_t layout_u8_u16x2_u64(const metrale_host_kernel_call_t* call, void* user) {
  (void)user;
  uint64_t* out = LARG(call, 3, uint64_t*);
  layout_u16x2 b = LARG(call, 1, layout_u16x2);
  out[0] = LARG(call, 0, uint8_t);
  out[1] = b.v[0];
  out[2] = b.v[1];
  out[3] = LARG(call, 2, uint64_t);
  return METRALE_OK;
}

static metrale_status_t layout_six(const metrale_host_kernel_call_t* call, void* user) {
  (void)user;
  uint64_t* out = LARG(call, 6, uint64_t*);
  double b = LARG(call, 1, double);
  out[0] = (uint64_t)(int64_t)LARG(call, 0, signed char);
  memcpy(&out[1], &b, 8);
  out[2] = (uint64_t)(int64_t)LARG(call, 2, short);
  out[3] = (uint64_t)(uintptr_t)LARG(call, 3, void*);
  out[4] = (uint64_t)LARG(call, 4, long long);
  out[5] = layout_fbits(LARG(call, 5, float));
  return METRALE_OK;
}

static metrale_status_t layout_struct(const metrale_host_kernel_call_t* call, void* user) {
  (void)user;
  uint64_t* out = LARG(call, 2, uint64_t*);
  layout_sv s = LARG(call, 1, layout_sv);
  out[0] = LARG(call, 0, uint8_t);
  out[1] = s.a;
  out[2] = s.b[0];
  out[3] = s.b[1];
  out[4] = layout_fbits(s.c);
  return METRALE_OK;
}

static void* layout_u8_u16x2_u64_ptr(void) { return (void*)layout_u8_u16x2_u64; }
static void* layout_six_ptr(void) { return (void*)layout_six; }
static void* layout_struct_ptr(void) { return (void*)layout_struct; }
*/
import "C"

import "unsafe"

// LayoutU8U16x2U64 is layout_u8_u16x2_u64(uint8_t, struct{uint16_t v[2]},
// uint64_t, uint64_t* out).
func LayoutU8U16x2U64() unsafe.Pointer { return C.layout_u8_u16x2_u64_ptr() }

// LayoutSix is layout_six(char, double, short, const void*, long long,
// float, uint64_t* out).
func LayoutSix() unsafe.Pointer { return C.layout_six_ptr() }

// LayoutStruct is layout_struct(uint8_t, struct{uint16_t a; uint8_t b[2];
// float c;}, uint64_t* out).
func LayoutStruct() unsafe.Pointer { return C.layout_struct_ptr() }
