#include "alloc_trace.hpp"

#include <algorithm>

namespace bench {

namespace {

constexpr uint8_t kCompute = 0, kComm = 1, kCopy = 2;

// Appends ops and keeps the live-byte count; a small splitmix64 gives the
// odd sizes of scratch blocks (its output is fixed by its arithmetic).
class Builder {
 public:
  explicit Builder(AllocTrace* t) : t_(t) {}
  uint32_t alloc(uint64_t bytes, uint8_t stream = kCompute) {
    const uint32_t id = t_->allocations++;
    t_->ops.push_back({TraceOp::ALLOC, stream, id, bytes});
    sizes_.push_back(bytes);
    live_ += bytes;
    t_->total_alloc_bytes += bytes;
    t_->peak_live_bytes = std::max(t_->peak_live_bytes, live_);
    return id;
  }
  void free(uint32_t id, uint8_t stream = kCompute) {
    t_->ops.push_back({TraceOp::FREE, stream, id, 0});
    live_ -= sizes_[id];
  }
  void record(uint32_t id, uint8_t stream) { t_->ops.push_back({TraceOp::RECORD, stream, id, 0}); }
  // A scratch block of 256 B .. ~20 KiB, allocated and freed at once.
  void scratch() { free(alloc(256 + (next() % 1280) * 16)); }
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

 private:
  AllocTrace* t_;
  std::vector<uint64_t> sizes_;
  uint64_t live_ = 0;
  uint64_t state_ = 0x5eed;
};

struct Param {
  uint32_t id;
  uint64_t elems;
};

}  // namespace

AllocTrace transformer_trace(const TraceShape& sh) {
  AllocTrace t;
  t.name = "gpt_l" + std::to_string(sh.layers) + "_h" + std::to_string(sh.hidden) + "_b" +
           std::to_string(sh.batch) + "_steps" + std::to_string(sh.steps);
  Builder b(&t);
  const uint64_t H = uint64_t(sh.hidden), e = uint64_t(sh.elem_bytes), V = uint64_t(sh.vocab);

  // Parameters: embedding (tied LM head), per layer two layer norms, qkv,
  // projection, MLP up and down, with biases; a final layer norm.
  std::vector<Param> params;
  auto param = [&](uint64_t elems) { params.push_back({b.alloc(elems * e), elems}); };
  param(V * H);
  for (int l = 0; l < sh.layers; ++l) {
    for (uint64_t n : {H, H, 3 * H * H, 3 * H, H * H, H, H, H, 4 * H * H, 4 * H, 4 * H * H, H})
      param(n);
  }
  param(H), param(H);
  std::vector<uint32_t> adam;  // fp32 exp_avg and exp_avg_sq, made at the first step

  const int seq_lens[] = {1024, 896, 1000, 768, 960, 832};
  for (int step = 0; step < sh.steps; ++step) {
    const uint64_t S = uint64_t(seq_lens[step % 6]), B = uint64_t(sh.batch), T = B * S;
    const uint64_t scores = B * uint64_t(sh.heads) * S * S * e;
    // Input ids and labels: copied in on the copy stream, used on compute.
    const uint32_t ids = b.alloc(T * 8, kCopy), labels = b.alloc(T * 8, kCopy);
    b.record(ids, kCompute), b.record(labels, kCompute);

    // Forward: what each layer saves for backward stays live.
    std::vector<uint32_t> saved;
    saved.push_back(b.alloc(T * H * e));  // embedding output
    for (int l = 0; l < sh.layers; ++l) {
      saved.push_back(b.alloc(T * H * e));                                  // ln1 out
      saved.push_back(b.alloc(T * 4)), saved.push_back(b.alloc(T * 4));     // ln1 mean, rstd
      saved.push_back(b.alloc(3 * T * H * e));                              // qkv
      const uint32_t sc = b.alloc(scores);                                  // q k^T
      saved.push_back(b.alloc(scores));                                     // softmax probs
      b.free(sc);
      saved.push_back(b.alloc(T * H * e));                                  // attention out
      b.scratch();
      saved.push_back(b.alloc(T * H * e));                                  // residual
      saved.push_back(b.alloc(T * H * e));                                  // ln2 out
      saved.push_back(b.alloc(T * 4)), saved.push_back(b.alloc(T * 4));
      saved.push_back(b.alloc(4 * T * H * e));                              // fc1 out
      saved.push_back(b.alloc(4 * T * H * e));                              // gelu out
      saved.push_back(b.alloc(T * H * e));                                  // residual
      b.scratch();
    }
    saved.push_back(b.alloc(T * H * e));  // final ln out
    const uint32_t logits = b.alloc(T * V * e);
    const uint32_t probs = b.alloc(T * V * 4);  // fp32 softmax for the loss
    const uint32_t loss = b.alloc(4);
    b.free(probs);
    b.free(ids, kCopy);

    // Backward: gradient of logits, then layers in reverse, each freeing
    // what it saved; weight grads go to the comm stream for all-reduce.
    uint32_t grad_x = b.alloc(T * V * e);
    b.free(logits);
    uint32_t g = b.alloc(T * H * e);
    b.free(grad_x), grad_x = g;
    std::vector<uint32_t> grads;
    size_t pi = params.size();
    for (int l = sh.layers - 1; l >= 0; --l) {
      const uint32_t gp = b.alloc(scores), gs = b.alloc(scores);  // attention backward
      b.free(gp);
      for (int k = 0; k < 12; ++k) {  // this layer's weight grads, last param first
        const uint32_t wg = b.alloc(params[--pi - 2].elems * e);
        b.record(wg, kComm);
        grads.push_back(wg);
      }
      b.free(gs);
      for (int k = 0; k < 13; ++k) {  // the layer's saved activations, newest first
        b.free(saved.back());
        saved.pop_back();
        if (k % 5 == 4) b.scratch();
      }
      g = b.alloc(T * H * e);
      b.free(grad_x), grad_x = g;
      // A gradient bucket: filled on compute, all-reduced and freed on comm.
      if (l % 2 == 0) b.free(b.alloc(25u << 20), kComm);
    }
    while (!saved.empty()) b.free(saved.back()), saved.pop_back();
    for (size_t k = 0; k < 3; ++k)  // embedding and final layer norm
      grads.push_back(b.alloc(params[k == 0 ? 0 : params.size() - k].elems * e));
    b.free(grad_x);
    b.free(loss);
    b.free(labels, kCopy);

    // Optimizer: Adam state at the first step, an fp32 temporary per
    // parameter, then the grads go (their last use was on the comm stream).
    for (const Param& p : params) {
      if (step == 0) adam.push_back(b.alloc(p.elems * 4)), adam.push_back(b.alloc(p.elems * 4));
      b.free(b.alloc(p.elems * 4));
    }
    for (uint32_t wg : grads) b.free(wg);
  }
  for (uint32_t a : adam) b.free(a);
  for (const Param& p : params) b.free(p.id);
  return t;
}

}  // namespace bench
