// The ledger's flat table (src/core/ledger_table.hpp) against
// std::unordered_map: random inserts, lookups, erases (backward shift inside
// long probe runs), growth and iteration. Keys are chosen to collide: many
// share a home slot, and runs wrap around the end of the array. Usage:
// test_ledger_table [CASE]
#include <cstdint>
#include <random>
#include <unordered_map>
#include <vector>

#include "core/ledger_table.hpp"
#include "core_check.hpp"

using metrale::core::LedgerTable;

namespace {

struct Value {
  uint64_t a = 0, b = 0;
};

// The table holds exactly the model's entries, each found by find and get.
void same(LedgerTable<Value>& t, const std::unordered_map<uint64_t, Value>& m) {
  CHECK_EQ(t.size(), m.size());
  size_t seen = 0;
  for (auto& slot : t) {
    ++seen;
    auto it = m.find(slot.first);
    CHECK(it != m.end());
    if (it != m.end()) CHECK_EQ(slot.second.a, it->second.a);
  }
  CHECK_EQ(seen, m.size());
  for (const auto& [k, v] : m) {
    Value* got = t.get(k);
    CHECK(got != nullptr);
    if (got != nullptr) CHECK_EQ(got->a, v.a);
    CHECK(t.find(k) != t.end());
  }
}

void random_against_map(uint64_t key_space, uint64_t stride) {
  std::mt19937_64 rng(key_space * 7 + stride);
  LedgerTable<Value> t;
  std::unordered_map<uint64_t, Value> m;
  for (int i = 0; i < 200000; ++i) {
    const uint64_t k = (rng() % key_space) * stride;
    const unsigned op = rng() % 4;
    if (op < 2) {
      t.reserve(t.size() + 1);
      Value* v = t.upsert_reserved(k);
      v->a = i;
      m[k].a = i;
    } else if (op == 2) {
      Value* v = t.get(k);
      CHECK_EQ(v != nullptr, m.count(k) == 1);
      if (v != nullptr) {
        t.erase_value(v);
        m.erase(k);
      }
    } else {
      auto it = t.find(k);
      CHECK_EQ(it != t.end(), m.count(k) == 1);
      if (it != t.end()) {
        t.erase(it);
        m.erase(k);
      }
    }
    if (i % 20000 == 0) same(t, m);
  }
  same(t, m);
  // Empty it again: nothing left behind, every key gone.
  for (const auto& [k, v] : m) {
    Value* got = t.get(k);
    CHECK(got != nullptr);
    if (got != nullptr) t.erase_value(got);
  }
  CHECK_EQ(t.size(), size_t{0});
  CHECK(t.begin() == t.end());
  for (const auto& [k, v] : m) CHECK(t.get(k) == nullptr);
}

// Device-pointer-like keys (512-aligned), a few hundred live: short runs.
void aligned_keys() { random_against_map(1000, 512); }
// Thousands live with a small key space: the table grows and shrinks its
// population many times, and erases happen inside long runs.
void dense_keys() { random_against_map(5000, 1); }
// Keys that differ only in high bits: the hash must spread them.
void high_bit_keys() { random_against_map(3000, uint64_t{1} << 40); }

void operators_and_try_emplace() {
  LedgerTable<Value> t;
  CHECK(t.get(42) == nullptr);
  CHECK(t.find(42) == t.end());
  auto [it, fresh] = t.try_emplace(42, Value{7, 8});
  CHECK(fresh);
  CHECK_EQ(it->second.b, uint64_t{8});
  auto [it2, fresh2] = t.try_emplace(42, Value{9, 9});
  CHECK(!fresh2);
  CHECK_EQ(it2->second.a, uint64_t{7});  // kept, as std::unordered_map does
  t[43].a = 5;
  CHECK_EQ(t.size(), size_t{2});
  CHECK_EQ(t[43].a, uint64_t{5});
  CHECK_EQ(t.size(), size_t{2});  // operator[] on a present key adds nothing
  // upsert of a present key returns its value, size unchanged.
  t.reserve(t.size() + 1);
  CHECK(t.upsert_reserved(42) == t.get(42));
  CHECK_EQ(t.size(), size_t{2});
  std::vector<std::pair<uint64_t, Value>> copy;
  const LedgerTable<Value>& ct = t;
  copy.assign(ct.begin(), ct.end());
  CHECK_EQ(copy.size(), size_t{2});
}

// A key of all ones (the table's free-slot mark) is never found, even in a
// table with free slots: a made-up pointer must not match one.
void all_ones_key_is_absent() {
  LedgerTable<Value> t;
  const uint64_t ones = ~uint64_t{0};
  CHECK(t.get(ones) == nullptr);
  t[4096].a = 1;
  t[8192].a = 2;
  CHECK(t.get(ones) == nullptr);
  CHECK(t.find(ones) == t.end());
  CHECK_EQ(t.size(), size_t{2});
}

}  // namespace

int main(int argc, char** argv) {
  return core_check::run(argc, argv, {
      {"aligned_keys", aligned_keys},
      {"dense_keys", dense_keys},
      {"high_bit_keys", high_bit_keys},
      {"operators_and_try_emplace", operators_and_try_emplace},
      {"all_ones_key_is_absent", all_ones_key_is_absent},
  });
}
