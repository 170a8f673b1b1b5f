// Streams, events, capture and graphs, with live, default and destroyed
// handles.
#include <algorithm>

#include "fuzz_state.hpp"

namespace fuzz {

namespace {

template <class T>
void drop(std::vector<T>& v, T x) {
  v.erase(std::remove(v.begin(), v.end(), x), v.end());
}

template <class T>
void bury(std::vector<T>& dead, T x) {
  dead.push_back(x);
  if (dead.size() > 16) dead.erase(dead.begin());
}

bool capturing(State& st, metrale_stream_t* s) {
  int c = metrale_stream_is_capturing(st.ctx, s);
  if (c != 0 && c != 1) violated("is_capturing not 0/1", "stream", METRALE_OK);
  return c == 1;
}

// A graph replay reruns copies the model cannot follow: forget everything.
void forget_all(Model& m) {
  m.stray = true;  // it may write memory freed since the capture, pads included
  for (Alloc& a : m.allocs) {
    std::fill(a.known.begin(), a.known.end(), 0);
    if (a.pad) a.pad_state = Pad::Unknown;
  }
}

Event* pick_event(State& st, Bytes& in) {
  if (st.events.empty()) return nullptr;
  return &st.events[in.pick(st.events.size())];
}

void op_event(State& st, Bytes& in, unsigned which) {
  if (which == 4) {
    if (st.events.size() >= 8) return;
    unsigned flags = in.pick(5) == 0 ? in.u32() : in.pick(2);
    metrale_event_t* e = nullptr;
    Want w = flags > 1 ? want_status(METRALE_ERROR_INVALID_ARGUMENT) : unless_lost(st, want_ok());
    if (expect(metrale_event_create(st.ctx, flags, &e), w, "event_create") == METRALE_OK) {
      st.events.push_back({e, flags == METRALE_EVENT_DEFAULT, 0});
      drop(st.dead_events, e);
    }
    return;
  }
  if (which == 8) {
    if (!st.dead_events.empty() && in.pick(3) == 0) {
      metrale_event_t* e = st.dead_events[in.pick(st.dead_events.size())];
      expect(metrale_event_destroy(st.ctx, e), want_fail(), "event_destroy dead");
      expect(metrale_event_query(st.ctx, e, nullptr), want_fail(), "event_query dead");
      return;
    }
    if (st.events.empty()) return;
    size_t i = in.pick(st.events.size());
    metrale_event_t* e = st.events[i].e;
    expect(metrale_event_destroy(st.ctx, e), want_ok(), "event_destroy");
    st.events.erase(st.events.begin() + static_cast<long>(i));
    bury(st.dead_events, e);
    return;
  }
  Event* ev = pick_event(st, in);
  if (ev == nullptr) return;
  StreamPick sp = pick_stream(st, in);
  switch (which) {
    case 5:
      if (expect(metrale_event_record(st.ctx, ev->e, sp.s),
                 for_stream(unless_lost(st, want_ok()), sp), "event_record") == METRALE_OK)
        ev->recorded = sp.capturing ? 2 : 1;
      break;
    case 6: {
      int done = -1;
      if (expect(metrale_event_query(st.ctx, ev->e, &done), want_any(), "event_query") == 0 &&
          done != 0 && done != 1)
        violated("event_query done not 0/1", "event", METRALE_OK);
      break;
    }
    case 7:
      expect(metrale_event_synchronize(st.ctx, ev->e),
             ev->recorded == 2 ? want_any() : unless_lost(st, want_ok()), "event_synchronize");
      break;
    case 9:
      expect(metrale_stream_wait_event(st.ctx, sp.s, ev->e),
             for_stream(unless_lost(st, ev->recorded == 2 ? want_any() : want_ok()), sp),
             "stream_wait_event");
      break;
    default: {
      Event* end = pick_event(st, in);
      float ms = -1;
      Want w = want_any();
      if (!ev->timing || !end->timing || ev->recorded == 0 || end->recorded == 0)
        w = want_fail();
      else if (ev->recorded == 1 && end->recorded == 1 && !st.m.lost)
        w = want_ok();
      if (expect(metrale_event_elapsed_ms(st.ctx, ev->e, end->e, &ms), w, "event_elapsed_ms") ==
              METRALE_OK &&
          !(ms == ms))
        violated("elapsed is NaN", "event", METRALE_OK);
      break;
    }
  }
}

void op_graph(State& st, Bytes& in, unsigned which) {
  StreamPick sp = pick_stream(st, in);
  if (which == 11) {
    Want w = sp.dead ? want_fail()
             : st.m.lost ? want_any()
             : sp.capturing ? want_status(METRALE_ERROR_CAPTURE)
                            : want_ok();
    if (expect(metrale_graph_begin_capture(st.ctx, sp.s), w, "begin_capture") == METRALE_OK &&
        !capturing(st, sp.s))
      violated("not capturing after begin_capture", "graph", METRALE_OK);
    return;
  }
  if (which == 12) {
    metrale_graph_t* g = nullptr;
    Want w = sp.dead ? want_fail()
             : !sp.capturing ? want_status(METRALE_ERROR_CAPTURE)
                             : want_ok_or(METRALE_ERROR_CAPTURE);
    if (st.m.lost) w = want_any();
    if (expect(metrale_graph_end_capture(st.ctx, sp.s, &g), w, "end_capture") == METRALE_OK) {
      if (st.graphs.size() >= 8) {
        expect(metrale_graph_destroy(st.ctx, g), want_ok(), "graph_destroy");
        bury(st.dead_graphs, g);
      } else {
        st.graphs.push_back(g);
        drop(st.dead_graphs, g);
      }
      if (capturing(st, sp.s)) violated("still capturing after end_capture", "graph", METRALE_OK);
    }
    return;
  }
  if (which == 13) {
    if (expect(metrale_graph_abort_capture(st.ctx, sp.s),
               sp.dead ? want_fail() : unless_lost(st, want_ok()), "abort_capture") == METRALE_OK &&
        capturing(st, sp.s))
      violated("still capturing after abort_capture", "graph", METRALE_OK);
    return;
  }
  bool dead = st.graphs.empty() || (!st.dead_graphs.empty() && in.pick(4) == 0);
  if (dead && st.dead_graphs.empty()) return;
  size_t i = dead ? in.pick(st.dead_graphs.size()) : in.pick(st.graphs.size());
  metrale_graph_t* g = dead ? st.dead_graphs[i] : st.graphs[i];
  if (which == 14) {
    // A replay may meet memory freed since the capture: refused, never a crash.
    Want w = dead ? want_fail() : sp.dead ? want_fail() : want_any();
    expect(metrale_graph_launch(st.ctx, g, sp.s), w, "graph_launch");
    forget_all(st.m);
    return;
  }
  expect(metrale_graph_destroy(st.ctx, g), dead ? want_fail() : want_ok(), "graph_destroy");
  if (!dead) {
    st.graphs.erase(st.graphs.begin() + static_cast<long>(i));
    bury(st.dead_graphs, g);
  }
}

}  // namespace

StreamPick pick_stream(State& st, Bytes& in) {
  StreamPick sp;
  switch (in.pick(8)) {
    case 0: sp.s = nullptr; break;
    case 1: sp.s = metrale_default_stream(st.ctx); break;
    case 2:
      if (!st.dead_streams.empty()) {
        sp.s = st.dead_streams[in.pick(st.dead_streams.size())];
        sp.dead = true;
        return sp;
      }
      break;
    default:
      if (!st.streams.empty()) sp.s = st.streams[in.pick(st.streams.size())];
      break;
  }
  sp.capturing = capturing(st, sp.s);
  return sp;
}

void op_work(State& st, Bytes& in, unsigned which) {
  switch (which) {
    case 0: {
      if (st.streams.size() >= 4) return;
      metrale_stream_t* s = nullptr;
      if (expect(metrale_stream_create(st.ctx, &s), unless_lost(st, want_ok()), "stream_create") ==
          METRALE_OK) {
        st.streams.push_back(s);
        drop(st.dead_streams, s);
      }
      return;
    }
    case 1: {
      if (st.streams.empty()) return;
      size_t i = in.pick(st.streams.size());
      metrale_stream_t* s = st.streams[i];
      expect(metrale_stream_destroy(st.ctx, s), want_ok(), "stream_destroy");
      st.streams.erase(st.streams.begin() + static_cast<long>(i));
      bury(st.dead_streams, s);
      return;
    }
    case 2: {
      expect(metrale_stream_destroy(st.ctx, metrale_default_stream(st.ctx)),
             want_status(METRALE_ERROR_INVALID_ARGUMENT), "stream_destroy default");
      if (!st.dead_streams.empty())
        expect(metrale_stream_destroy(st.ctx, st.dead_streams[in.pick(st.dead_streams.size())]),
               want_fail(), "stream_destroy dead");
      return;
    }
    case 3: {
      StreamPick sp = pick_stream(st, in);
      Want w = sp.dead || st.m.lost ? want_fail()
               : sp.capturing ? want_status(METRALE_ERROR_CAPTURE)
                              : want_ok();
      expect(metrale_stream_synchronize(st.ctx, sp.s), w, "stream_synchronize");
      return;
    }
    default:
      if (which <= 10) return op_event(st, in, which);
      return op_graph(st, in, which);
  }
}

}  // namespace fuzz
