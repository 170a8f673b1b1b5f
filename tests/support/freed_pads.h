/* What the suites on freed red-zone pads share (redzone_reuse,
 * redzone_owners): pool stats, a byte written into a pad, the error lines
 * the library logs about pads overwritten before their free, and the pad
 * read back. Static: each suite has its own copy of the captured lines. */
#pragma once

#include <stdlib.h>
#include <string.h>

#include "test_support.h"

/* A context with pad_bytes red zones, created while the variables
 * METRALE_REDZONE_VERIFY_BATCH, METRALE_REDZONE_VERIFY_ORDERED and
 * METRALE_REDZONE_REUSE are batch, ordered and reuse (NULL: unset). NULL
 * return: the pool is off (METRALE_POOL=0), the test skips. */
static metrale_context_t* open_padded(size_t pad_bytes, const char* batch, const char* ordered,
                                      const char* reuse) {
  const char* names[] = {"METRALE_REDZONE_VERIFY_BATCH", "METRALE_REDZONE_VERIFY_ORDERED",
                         "METRALE_REDZONE_REUSE"};
  const char* values[] = {batch, ordered, reuse};
  for (int i = 0; i < 3; ++i)
    if (values[i] != NULL) setenv(names[i], values[i], 1);
  metrale_context_options_t o = mt_options();
  o.redzone_bytes = pad_bytes;
  metrale_context_t* ctx = mt_open(&o);
  for (int i = 0; i < 3; ++i) unsetenv(names[i]);
  if (!mt_pool_on(ctx)) {
    mt_close(ctx);
    return NULL;
  }
  return ctx;
}

static metrale_pool_stats_t stats(metrale_context_t* ctx) {
  metrale_pool_stats_t s = {.struct_size = sizeof s};
  MT_OK(metrale_pool_stats(ctx, &s));
  return s;
}

/* One byte (0x5a) written off bytes past the end of the buffer at p. */
static void smash(metrale_context_t* ctx, metrale_devptr_t p, size_t bytes, size_t off) {
  const unsigned char junk = 0x5a;
  MT_OK(metrale_copy_h2d(ctx, &junk, 1, p + bytes + off));
}

/* The pad_bytes after the buffer at p hold the pattern. */
static inline void expect_pattern(metrale_context_t* ctx, metrale_devptr_t p, size_t bytes,
                           size_t pad_bytes) {
  unsigned char* pad = mt_read_device(ctx, p + bytes, pad_bytes);
  for (size_t i = 0; i < pad_bytes; ++i) assert_int_equal(pad[i], METRALE_REDZONE_PATTERN);
  free(pad);
}

/* Lines the library logs about freed pads. */
static char g_logged[8192];
static int g_lines;
static void capture(metrale_log_level_t level, const char* msg, void* user) {
  (void)user;
  if (level < METRALE_LOG_ERROR || strstr(msg, "before its free") == NULL) return;
  g_lines++;
  /* Bounded: past 8 KiB of lines, the rest is counted, not kept. */
  const size_t used = strlen(g_logged);
  if (used + 2 >= sizeof g_logged) return;
  strncat(g_logged, msg, sizeof g_logged - used - 2);
  strcat(g_logged, "\n");
}
static void start_capture(void) {
  g_logged[0] = '\0';
  g_lines = 0;
  MT_OK(metrale_log_set_callback(capture, NULL));
}
static void stop_capture(void) { MT_OK(metrale_log_set_callback(NULL, NULL)); }
