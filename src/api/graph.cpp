// Graphs by stream capture.
#include "api/guard.hpp"

using metrale::api::guarded;
using metrale::api::live;
using metrale::api::require;

METRALE_API metrale_status_t metrale_graph_begin_capture(metrale_context_t* ctx,
                                                         metrale_stream_t* stream) {
  return guarded([&] { live(ctx)->graph_begin_capture(stream); });
}

METRALE_API metrale_status_t metrale_graph_end_capture(metrale_context_t* ctx,
                                                       metrale_stream_t* stream,
                                                       metrale_graph_t** graph) {
  return guarded([&] {
    metrale_context* c = live(ctx);
    require(graph, "graph");
    *graph = c->graph_end_capture(stream);
  });
}

METRALE_API metrale_status_t metrale_graph_abort_capture(metrale_context_t* ctx,
                                                         metrale_stream_t* stream) {
  return guarded([&] { live(ctx)->graph_abort_capture(stream); });
}

METRALE_API metrale_status_t metrale_graph_launch(metrale_context_t* ctx, metrale_graph_t* graph,
                                                  metrale_stream_t* stream) {
  return guarded([&] { live(ctx)->graph_launch(graph, stream); });
}

METRALE_API metrale_status_t metrale_graph_destroy(metrale_context_t* ctx,
                                                   metrale_graph_t* graph) {
  return guarded([&] { live(ctx)->graph_destroy(graph); });
}
