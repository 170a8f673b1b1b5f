// METRALE_REDZONE_REUSE=n: up to n owners of a padded pooled block share
// one check of its pad (see core/pool/pad_owners.hpp). A free on the block's
// own stream puts the block straight back into that stream's reuse bins,
// its pad unchecked and its owner recorded; only an allocation of the same
// size and pad takes it from there, so the pad stays on the same bytes and
// an overrun stays in it. The n-th owner's free, a free on another stream,
// a block marked with record_stream, a pad a scan reported, and any block
// the pool must merge or give to another size go through the check of
// freed pads (pad_verify_ops.cpp), which then names every owner since the
// last check. The first such finding turns the reuse off for the context,
// so the next overrun is named exactly.
#include <string>

#include "core/context.hpp"
#include "core/format.hpp"
#include "core/log.hpp"

using metrale::core::PendingPad;
using metrale::core::pool::Block;
using metrale::core::pool::PadOwners;

bool metrale_context::UncheckedPads::take_unchecked(Block* b) noexcept {
  return ctx->queue_unchecked_held(b);
}

bool metrale_context::chain_freed_pad_held(DevPtr ptr, const metrale::core::LedgerEntry& e,
                                           metrale::core::StreamObj* st, const char* file,
                                           int line) noexcept {
  Block* b = e.block;
  if (!b->uses.empty() || (st != nullptr && st->handle != b->stream) ||
      reuse_off_.load(std::memory_order_relaxed)) {
    return false;
  }
  // The pad must be where the block's pattern record starts: a later owner
  // of the same size then finds it there, and nothing else lies between.
  if (b->pattern.from != e.bytes || !b->pattern.covers(e.bytes, e.bytes + e.pad)) return false;
  PadOwners* o = b->owners.get();
  const uint32_t n = o != nullptr ? o->count : 0;
  if (n + 1 >= reuse_owners_) return false;  // this owner's free is the check
  if (n != 0 && (o->bytes != e.bytes || o->pad != e.pad)) return false;
  // A pad a scan reported is repaired only by its check.
  if (pad_verify_.any_reported() && pad_verify_.was_reported(e.seq)) return false;
  uint32_t free_site = 0;
  try {
    free_site = ledger_.intern_site_held(file != nullptr ? file : "<unknown>", line);
    if (o == nullptr) {
      b->owners = std::make_unique<PadOwners>();
      o = b->owners.get();
    }
  } catch (...) {
    return false;  // the check, as without the reuse
  }
  if (!pool_->bin_unchecked_held(b)) return false;
  chunk_source_->block_returned(ptr);
  o->bytes = e.bytes;
  o->pad = e.pad;
  o->owner[n] = PadOwners::Owner{e.seq, e.site, free_site, e.tag, static_cast<int>(e.kind)};
  o->count = n + 1;
  return true;
}

bool metrale_context::queue_unchecked_held(Block* b) noexcept {
  PadOwners& o = *b->owners;
  const PadOwners::Owner& last = o.owner[o.count - 1];
  PendingPad* p = nullptr;
  try {
    p = &pad_verify_.emplace_held();  // its mutex is the ledger's, held
  } catch (...) {
    // Logged once the lock is released (a log callback may call back in).
    unchecked_dropped_.fetch_add(1, std::memory_order_relaxed);
    unchecked_due_.store(true, std::memory_order_relaxed);
    return false;
  }
  p->ptr = b->ptr;
  p->entry.bytes = o.bytes;
  p->entry.reserved = b->size;
  p->entry.pad = o.pad;
  p->entry.seq = last.seq;
  p->entry.site = last.site;
  p->entry.kind = static_cast<metrale_alloc_kind_t>(last.kind);
  p->entry.tag = last.tag;
  p->entry.block = b;
  p->free_site = last.free_site;
  p->stream = 0;  // the block's own, whatever it becomes (a retired stream's heir)
  p->check_from = o.bytes;
  p->check_to = b->pattern.covers(o.bytes, o.bytes + o.pad) ? b->pattern.to : o.bytes + o.pad;
  p->held_bytes = b->size;
  p->earlier_count = o.count - 1;
  p->earlier_at = owner_log_.append(o.owner, o.count - 1);
  o.count = 0;
  chunk_source_->block_handed_out(b->ptr, o.bytes + o.pad);  // paired with the release's
  if (pad_verify_.commit_held()) unchecked_due_.store(true, std::memory_order_relaxed);
  return true;
}

void metrale_context::take_earlier_owners_held(Block* b, PendingPad* p) noexcept {
  if (!b->unchecked()) return;
  p->earlier_count = b->owners->count;
  p->earlier_at = owner_log_.append(b->owners->owner, b->owners->count);
  b->owners->count = 0;
}

void metrale_context::flush_unchecked_pads() {
  if (reuse_owners_ <= 1 || !pool_) return;
  pool_->flush_unchecked();
  log_dropped_unchecked();
}

void metrale_context::run_unchecked_due() noexcept {
  unchecked_due_.store(false, std::memory_order_relaxed);
  log_dropped_unchecked();
  verify_freed_pads(false);
}

void metrale_context::log_dropped_unchecked() noexcept {
  const uint64_t n = unchecked_dropped_.exchange(0, std::memory_order_relaxed);
  if (n == 0) return;
  metrale::core::log().error(
      "red zones: out of host memory queueing the pad checks of {} reused blocks: their owners' "
      "overruns go unchecked (the blocks were cached without their pattern record)",
      n);
}

std::string metrale_context::earlier_owners_text(const PadOwners::Owner* o, uint32_t n,
                                                 bool known) const {
  std::string s = "or by one of the " + metrale::core::plural(n, "earlier allocation") +
                  " of its block since its pad was last checked (METRALE_REDZONE_REUSE; same "
                  "size, same stream)";
  if (!known) return s + " (no longer recorded: too many checks queued since)";
  s += ": ";
  for (uint32_t i = 0; i < n; ++i) {
    const PadOwners::Owner& w = o[i];
    if (i != 0) s += ", ";
    s += "seq " + std::to_string(w.seq) + " from " +
         metrale::core::site_text(ledger_.site_file(w.site), ledger_.site_line(w.site)) +
         " freed at " +
         metrale::core::site_text(ledger_.site_file(w.free_site), ledger_.site_line(w.free_site));
  }
  return s;
}

std::string metrale_context::live_pad_earlier_owners(DevPtr ptr, uint64_t seq) {
  PadOwners owners;
  {
    // A copy: the text reads the ledger's sites, under the same lock.
    std::lock_guard<metrale::core::FastMutex> lock(ledger_.mutex());
    const metrale::core::LedgerEntry* e = ledger_.find_locked(ptr);
    if (e == nullptr || e->seq != seq || e->block == nullptr || !e->block->unchecked()) return {};
    owners = *e->block->owners;
  }
  return earlier_owners_text(owners.owner, owners.count, true);
}

std::string metrale_context::logged_earlier_owners(const PendingPad& p) {
  if (p.earlier_count == 0) return {};
  PadOwners::Owner owners[PadOwners::kMax];
  bool known = false;
  {
    std::lock_guard<metrale::core::FastMutex> lock(ledger_.mutex());
    known = p.earlier_count <= PadOwners::kMax &&
            owner_log_.read(p.earlier_at, p.earlier_count, owners);
  }
  return earlier_owners_text(owners, p.earlier_count, known);
}

void metrale_context::stop_pad_reuse(const char* why) noexcept {
  if (reuse_owners_ <= 1 || reuse_off_.exchange(true)) return;
  metrale::core::log().warn(
      "red zones: {}; blocks are no longer reused before their pad is checked "
      "(METRALE_REDZONE_REUSE is off for this context), so the next overrun names its "
      "allocation alone",
      why);
}
