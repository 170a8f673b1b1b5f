// The value a caller holds for any handle (context, stream, event, graph,
// kernel): not an address but (slot index, serial) packed into a pointer-
// sized word. Serials come from ONE process-wide counter shared by every
// table of every kind and every context, so a value is issued at most once
// in a process: a destroyed handle, another context's handle or a handle of
// another kind never matches a live slot.
//
// Layout (bit 63 first):  0 | 1 | serial (41 bits) | slot (20 bits) | 1
// - bit 62 set, bit 63 clear: the value is >= 2^62, above every user-space
//   address and outside Go's heap arenas (cgo may hold it as a pointer), and
//   never below 4096;
// - bit 0 set: odd, so it never equals an aligned pointer to a real object.
#pragma once

#include <cstdint>

namespace metrale::core::handle_id {

constexpr unsigned kSlotBits = 20;    // 1,048,576 live handles per table
constexpr unsigned kSerialBits = 41;  // 2.2e12 handles per process
constexpr uint64_t kSlotMask = (uint64_t{1} << kSlotBits) - 1;
constexpr uint64_t kSerialMask = (uint64_t{1} << kSerialBits) - 1;
constexpr uint64_t kTag = uint64_t{1} << 62;
constexpr uint64_t kFixedMask = (uint64_t{3} << 62) | 1;  // bits that must read 0b01...1

constexpr uint64_t encode(uint32_t slot, uint64_t serial) {
  return kTag | (serial << (kSlotBits + 1)) | (uint64_t{slot} << 1) | 1;
}
constexpr bool well_formed(uint64_t v) { return (v & kFixedMask) == (kTag | 1); }
constexpr uint32_t slot_of(uint64_t v) { return static_cast<uint32_t>((v >> 1) & kSlotMask); }
// 0 for a value no table ever issued (0 marks a dead slot).
constexpr uint64_t serial_of(uint64_t v) { return (v >> (kSlotBits + 1)) & kSerialMask; }

// A fresh serial, never returned before in this process (1, 2, 3, ...).
// Throws OUT_OF_MEMORY once all 2^41 - 1 are spent.
uint64_t next_serial();

template <class H>
uint64_t value_of(const H* h) {
  return reinterpret_cast<uintptr_t>(h);
}
template <class H>
H* handle_from(uint64_t v) {
  return reinterpret_cast<H*>(static_cast<uintptr_t>(v));
}

}  // namespace metrale::core::handle_id
