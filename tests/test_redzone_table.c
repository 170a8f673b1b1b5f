/* Red-zone scans keep the pad table between scans (core's PadMirror, fed by
 * the ledger's record of changed pad slots; cuda keeps the table on the
 * device and the host backend a copy, each taking only the changed slots).
 * What such a table can get wrong is invalidation: a pad added, moved (a
 * free moves the last pad into the freed slot), restored (a free the backend
 * refused) or removed between two scans must be seen by the second scan
 * exactly as a scan from scratch would see it. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

#define PAD 64
#define BYTES 100

static metrale_context_t* open_padded(void) {
  metrale_context_options_t o = mt_options();
  o.redzone_bytes = PAD;
  return mt_open(&o);
}

/* Overwrites one byte of p's pad (offset off past the buffer). */
static void smash(metrale_context_t* ctx, metrale_devptr_t p, size_t off) {
  const unsigned char junk = 0x5a;
  MT_OK(metrale_copy_h2d(ctx, &junk, 1, p + BYTES + off));
}

/* Scans and checks that exactly the blocks in want[0, nwant) are reported. */
static void expect_reported(metrale_context_t* ctx, const metrale_devptr_t* want, size_t nwant) {
  metrale_redzone_violation_t v[16];
  memset(v, 0, sizeof v);
  size_t n = 12345;
  MT_STATUS(metrale_redzone_scan(ctx, v, 16, &n),
            nwant == 0 ? METRALE_OK : METRALE_ERROR_REDZONE_CORRUPTED);
  assert_int_equal(n, nwant);
  for (size_t i = 0; i < nwant; ++i) {
    int seen = 0;
    for (size_t j = 0; j < n && j < 16; ++j) seen |= v[j].ptr == want[i];
    if (!seen) fail_msg("pad of 0x%llx not reported", (unsigned long long)want[i]);
  }
}

static void scan_with_no_pads(void** state) {
  (void)state;
  metrale_context_t* ctx = open_padded();
  expect_reported(ctx, NULL, 0);
  /* The table had pads at the last scan and has none now. */
  metrale_devptr_t p[3];
  for (int i = 0; i < 3; ++i) MT_OK(metrale_alloc(ctx, BYTES, &p[i]));
  expect_reported(ctx, NULL, 0);
  for (int i = 0; i < 3; ++i) MT_OK(metrale_free(ctx, p[i]));
  expect_reported(ctx, NULL, 0);
  /* And grows again from nothing. */
  metrale_devptr_t q = 0;
  MT_OK(metrale_alloc(ctx, BYTES, &q));
  smash(ctx, q, 0);
  expect_reported(ctx, &q, 1);
  MT_OK(metrale_free(ctx, q));
  mt_close(ctx);
}

static void pad_added_between_scans_is_seen(void** state) {
  (void)state;
  metrale_context_t* ctx = open_padded();
  metrale_devptr_t a = 0, b = 0, c = 0;
  MT_OK(metrale_alloc(ctx, BYTES, &a));
  expect_reported(ctx, NULL, 0);
  MT_OK(metrale_alloc(ctx, BYTES, &b));
  smash(ctx, b, 7);
  expect_reported(ctx, &b, 1);
  /* Nothing changed in the table: the same answer from the kept table. */
  expect_reported(ctx, &b, 1);
  MT_OK(metrale_redzone_poison(ctx, 0, UINT64_MAX));
  expect_reported(ctx, NULL, 0);
  MT_OK(metrale_alloc(ctx, BYTES, &c));
  smash(ctx, c, PAD - 1);
  expect_reported(ctx, &c, 1);
  MT_OK(metrale_free(ctx, a));
  MT_OK(metrale_free(ctx, b));
  MT_OK(metrale_free(ctx, c));
  mt_close(ctx);
}

static void pad_moved_by_a_free_is_seen(void** state) {
  (void)state;
  metrale_context_t* ctx = open_padded();
  metrale_devptr_t p[4];
  for (int i = 0; i < 4; ++i) MT_OK(metrale_alloc(ctx, BYTES, &p[i]));
  expect_reported(ctx, NULL, 0);
  /* Freeing the first pad moves the last one (p[3]) into its slot. */
  MT_OK(metrale_free(ctx, p[0]));
  smash(ctx, p[3], 2);
  expect_reported(ctx, &p[3], 1);
  /* The moved pad freed too: nothing of it is read or reported any more. */
  MT_OK(metrale_free(ctx, p[3]));
  expect_reported(ctx, NULL, 0);
  smash(ctx, p[1], 0);
  smash(ctx, p[2], 5);
  expect_reported(ctx, &p[1], 2);
  MT_OK(metrale_free(ctx, p[1]));
  MT_OK(metrale_free(ctx, p[2]));
  expect_reported(ctx, NULL, 0);
  mt_close(ctx);
}

static void pad_restored_by_a_refused_free_is_seen(void** state) {
  (void)state;
  if (mt_backend() != METRALE_BACKEND_HOST) {
    print_message("skip: needs METRALE_TEST_HOST_FAIL_FREE, a host-backend test hook\n");
    skip();
  }
  metrale_context_options_t o = mt_options();
  o.redzone_bytes = PAD;
  /* The hook fails driver frees, which the pool would not make: pool off,
   * even when the run sets METRALE_POOL=1 (the variable wins over options). */
  o.pool = 0;
  const char* pool_env = getenv("METRALE_POOL");
  char* saved_pool = pool_env != NULL ? strdup(pool_env) : NULL;
  unsetenv("METRALE_POOL");
  setenv("METRALE_TEST_HOST_FAIL_FREE", "1", 1); /* the first free fails */
  metrale_context_t* ctx = NULL;
  metrale_status_t created = metrale_context_create(&o, &ctx);
  unsetenv("METRALE_TEST_HOST_FAIL_FREE");
  if (saved_pool != NULL) {
    setenv("METRALE_POOL", saved_pool, 1);
    free(saved_pool);
  }
  MT_OK(created);
  metrale_devptr_t p[3];
  for (int i = 0; i < 3; ++i) MT_OK(metrale_alloc(ctx, BYTES, &p[i]));
  expect_reported(ctx, NULL, 0);
  /* The backend refuses: the ledger takes p[0] back into its slot and moves
   * p[2], which the take had put there, back to the end. */
  MT_STATUS(metrale_free(ctx, p[0]), METRALE_ERROR_DRIVER);
  smash(ctx, p[0], 1);
  smash(ctx, p[2], 1);
  expect_reported(ctx, (metrale_devptr_t[]){p[0], p[2]}, 2);
  for (int i = 0; i < 3; ++i) MT_OK(metrale_free(ctx, p[i]));
  expect_reported(ctx, NULL, 0);
  mt_close(ctx);
}

/* Past half the table changed, the ledger stops listing slots and the next
 * scan takes the whole table: both ways must give the same answer. */
static void many_changes_between_two_scans(void** state) {
  (void)state;
  enum { MANY = 400 };
  metrale_context_t* ctx = open_padded();
  metrale_devptr_t* p = calloc(MANY, sizeof *p);
  assert_non_null(p);
  for (int i = 0; i < 10; ++i) MT_OK(metrale_alloc(ctx, BYTES, &p[i]));
  expect_reported(ctx, NULL, 0);
  for (int i = 10; i < MANY; ++i) MT_OK(metrale_alloc(ctx, BYTES, &p[i]));
  smash(ctx, p[MANY - 1], 0);
  smash(ctx, p[200], 9);
  expect_reported(ctx, (metrale_devptr_t[]){p[200], p[MANY - 1]}, 2);
  MT_OK(metrale_redzone_poison(ctx, 0, UINT64_MAX));
  /* Free most of them, every other one first: pads move all over the table. */
  for (int i = 0; i < MANY; i += 2) MT_OK(metrale_free(ctx, p[i]));
  for (int i = 1; i < MANY - 40; i += 2) MT_OK(metrale_free(ctx, p[i]));
  smash(ctx, p[MANY - 1], 3);
  smash(ctx, p[MANY - 21], 4);
  expect_reported(ctx, (metrale_devptr_t[]){p[MANY - 21], p[MANY - 1]}, 2);
  for (int i = MANY - 39; i < MANY; i += 2) MT_OK(metrale_free(ctx, p[i]));
  expect_reported(ctx, NULL, 0);
  free(p);
  mt_close(ctx);
}

/* A small deterministic generator: the same churn on every run. */
static uint32_t next_random(uint32_t* s) {
  *s ^= *s << 13;
  *s ^= *s >> 17;
  *s ^= *s << 5;
  return *s;
}

static void many_scans_with_churn_between(void** state) {
  (void)state;
  enum { SLOTS = 48, ROUNDS = 150 };
  metrale_context_t* ctx = open_padded();
  metrale_devptr_t live[SLOTS] = {0};
  uint32_t seed = 0x9e3779b9u;
  for (int round = 0; round < ROUNDS; ++round) {
    /* A burst of allocs and frees in random slots (sometimes none: a scan
     * over an unchanged table). */
    const uint32_t ops = next_random(&seed) % 12;
    for (uint32_t k = 0; k < ops; ++k) {
      const uint32_t i = next_random(&seed) % SLOTS;
      if (live[i] != 0) {
        MT_OK(metrale_free(ctx, live[i]));
        live[i] = 0;
      } else {
        MT_OK(metrale_alloc(ctx, BYTES + (next_random(&seed) % 3) * 8, &live[i]));
      }
    }
    /* Smash up to three live pads, then expect exactly those. */
    metrale_devptr_t want[3];
    size_t nwant = 0;
    const uint32_t smashes = next_random(&seed) % 4;
    for (uint32_t k = 0; k < smashes; ++k) {
      const uint32_t i = next_random(&seed) % SLOTS;
      if (live[i] == 0) continue;
      int dup = 0;
      for (size_t j = 0; j < nwant; ++j) dup |= want[j] == live[i];
      if (dup) continue;
      metrale_allocation_t a[SLOTS];
      size_t n = 0;
      MT_OK(metrale_live_allocations(ctx, a, SLOTS, &n));
      size_t bytes = 0;
      for (size_t j = 0; j < n; ++j)
        if (a[j].ptr == live[i]) bytes = a[j].bytes;
      const unsigned char junk = 0x5a;
      MT_OK(metrale_copy_h2d(ctx, &junk, 1, live[i] + bytes + next_random(&seed) % PAD));
      want[nwant++] = live[i];
    }
    expect_reported(ctx, want, nwant);
    if (nwant > 0) MT_OK(metrale_redzone_poison(ctx, 0, UINT64_MAX));
  }
  for (int i = 0; i < SLOTS; ++i)
    if (live[i] != 0) MT_OK(metrale_free(ctx, live[i]));
  expect_reported(ctx, NULL, 0);
  mt_close(ctx);
}

/* Two threads scanning while a third allocates and frees: one scan holds the
 * kept table, the other takes a snapshot of its own; neither waits for the
 * other, and with every pad intact every scan is clean. */
struct churn_args {
  metrale_context_t* ctx;
  int rounds;
  int failures;
};

static void* churn_thread(void* arg) {
  struct churn_args* a = (struct churn_args*)arg;
  metrale_devptr_t p[8] = {0};
  for (int r = 0; r < a->rounds; ++r) {
    const int i = r % 8;
    if (p[i] != 0) {
      if (metrale_free(a->ctx, p[i]) != METRALE_OK) a->failures++;
      p[i] = 0;
    } else if (metrale_alloc(a->ctx, BYTES, &p[i]) != METRALE_OK) {
      a->failures++;
    }
  }
  for (int i = 0; i < 8; ++i)
    if (p[i] != 0 && metrale_free(a->ctx, p[i]) != METRALE_OK) a->failures++;
  return NULL;
}

static void* scan_thread(void* arg) {
  struct churn_args* a = (struct churn_args*)arg;
  for (int r = 0; r < a->rounds; ++r) {
    size_t n = 99;
    if (metrale_redzone_scan(a->ctx, NULL, 0, &n) != METRALE_OK || n != 0) a->failures++;
  }
  return NULL;
}

static void concurrent_scans_during_churn(void** state) {
  (void)state;
  metrale_context_t* ctx = open_padded();
  metrale_devptr_t base[16];
  for (int i = 0; i < 16; ++i) MT_OK(metrale_alloc(ctx, BYTES, &base[i]));
  struct churn_args churn = {ctx, 2000, 0};
  struct churn_args scan1 = {ctx, 200, 0}, scan2 = {ctx, 200, 0};
  pthread_t t[3];
  assert_int_equal(pthread_create(&t[0], NULL, churn_thread, &churn), 0);
  assert_int_equal(pthread_create(&t[1], NULL, scan_thread, &scan1), 0);
  assert_int_equal(pthread_create(&t[2], NULL, scan_thread, &scan2), 0);
  for (int i = 0; i < 3; ++i) pthread_join(t[i], NULL);
  assert_int_equal(churn.failures, 0);
  assert_int_equal(scan1.failures, 0);
  assert_int_equal(scan2.failures, 0);
  /* The kept table is still right after the storm. */
  smash(ctx, base[9], 3);
  expect_reported(ctx, &base[9], 1);
  for (int i = 0; i < 16; ++i) MT_OK(metrale_free(ctx, base[i]));
  expect_reported(ctx, NULL, 0);
  mt_close(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(scan_with_no_pads),
      cmocka_unit_test(pad_added_between_scans_is_seen),
      cmocka_unit_test(pad_moved_by_a_free_is_seen),
      cmocka_unit_test(pad_restored_by_a_refused_free_is_seen),
      cmocka_unit_test(many_changes_between_two_scans),
      cmocka_unit_test(many_scans_with_churn_between),
      cmocka_unit_test(concurrent_scans_during_churn),
  };
  return MT_RUN(tests);
}
