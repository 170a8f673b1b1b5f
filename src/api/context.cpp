// Context lifetime and state.
#include "api/guard.hpp"
#include "core/options.hpp"

using metrale::api::claim;
using metrale::api::guarded;
using metrale::api::live;
using metrale::api::require;

METRALE_API metrale_status_t metrale_context_options_init_sized(metrale_context_options_t* opts,
                                                                size_t struct_size) {
  return guarded([&] {
    require(opts, "opts");
    metrale::core::default_options_sized(opts, struct_size);
  });
}

// The exported symbol binaries built against 0.1 call: their struct ends
// before `pool`, so writing sizeof(metrale_context_options_t) would overrun.
#undef metrale_context_options_init
METRALE_API metrale_status_t metrale_context_options_init(metrale_context_options_t* opts) {
  return metrale_context_options_init_sized(opts, metrale::core::options_v1_size());
}

METRALE_API metrale_status_t metrale_context_create(const metrale_context_options_t* opts,
                                                    metrale_context_t** out) {
  return guarded([&] {
    require(out, "out");
    *out = metrale_context::create(opts);
  });
}

METRALE_API metrale_status_t metrale_context_destroy(metrale_context_t* ctx) {
  return guarded([&] {
    if (ctx == nullptr) return;
    // Pinned while it is asked: of two racing destroys, the other one may
    // claim and delete it right after this finds it.
    const uint64_t handle = metrale::core::handle_id::value_of(ctx);
    if (!metrale::core::with_context(handle, [](metrale_context& c) {
          c.refuse_destroy_from_inside();
        })) {
      metrale::api::refuse_context(ctx);
    }
    claim(ctx)->destroy();
  });
}

METRALE_API metrale_backend_t metrale_context_backend(const metrale_context_t* ctx) {
  const metrale_context* c = metrale::core::find_context(metrale::core::handle_id::value_of(ctx));
  return c != nullptr ? c->backend_kind() : METRALE_BACKEND_AUTO;
}

METRALE_API metrale_status_t metrale_context_bind_thread(metrale_context_t* ctx) {
  return guarded([&] { live(ctx)->bind_thread(); });
}

METRALE_API metrale_status_t metrale_context_fault(metrale_context_t* ctx) {
  return guarded([&] { live(ctx)->fault_status(); });
}
