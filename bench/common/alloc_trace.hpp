// An allocation trace shaped like transformer training steps, generated
// deterministically (no library, no driver, no std distributions: the same
// ops on every machine and compiler), so the pool, torch's caching
// allocator and the driver's memory pool replay exactly the same sequence
// (bench_pool and bench/anchors/torch_alloc.cpp both link this file).
//
// What it holds: parameters and their Adam state (persistent); per step,
// input ids copied in on a copy stream and used on the compute stream
// (record), activations allocated layer by layer and freed in reverse in
// the backward pass, attention score/probability temporaries, small
// scratch blocks of odd sizes, weight gradients handed to a comm stream
// (record) and freed on the compute stream after the optimizer, gradient
// buckets allocated on the compute stream and freed on the comm stream (a
// free on another stream than the allocation's). The sequence length
// changes from step to step, as with packed variable-length batches, so
// cached blocks of one step do not fit the next exactly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace bench {

struct TraceOp {
  enum Kind : uint8_t { ALLOC, FREE, RECORD } kind;
  uint8_t stream;  // 0 compute, 1 comm, 2 copy
  uint32_t id;     // the allocation: ALLOC creates it, FREE ends it
  uint64_t bytes;  // ALLOC only
};

struct TraceShape {
  int layers = 8;
  int hidden = 1024;
  int heads = 16;
  int batch = 4;
  int vocab = 32000;
  int steps = 4;
  int elem_bytes = 2;  // bf16 activations and weights
};

struct AllocTrace {
  std::string name;          // e.g. "gpt_l8_h1024_b4_s4": for row ids
  std::vector<TraceOp> ops;
  uint32_t allocations = 0;  // ids are 0 .. allocations-1
  int streams = 3;
  uint64_t peak_live_bytes = 0;  // most bytes live at once, as asked: a floor for any pool
  uint64_t total_alloc_bytes = 0;
};

// The trace for `shape`; every allocation is freed by its end.
AllocTrace transformer_trace(const TraceShape& shape);

}  // namespace bench
