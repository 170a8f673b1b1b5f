#include "event_reader.hpp"

#include <algorithm>
#include <fstream>

#include "json_value.hpp"

namespace metrale_replay {

bool parse_hex(const std::string& text, uint64_t* out) {
  if (text.size() < 3 || text.size() > 18 || text[0] != '0' || (text[1] != 'x' && text[1] != 'X'))
    return false;
  uint64_t v = 0;
  for (size_t k = 2; k < text.size(); ++k) {
    const char c = text[k];
    v <<= 4;
    if (c >= '0' && c <= '9') v |= static_cast<uint64_t>(c - '0');
    else if (c >= 'a' && c <= 'f') v |= static_cast<uint64_t>(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') v |= static_cast<uint64_t>(c - 'A' + 10);
    else return false;
  }
  *out = v;
  return true;
}

namespace {

// Field readers: each sets *why and returns false when the field is
// missing or has the wrong type.
bool want_u64(const Json& o, const char* key, uint64_t* out, std::string* why) {
  const Json* v = o.get(key);
  if (v == nullptr || v->kind != Json::Int) {
    *why = std::string("\"") + key + "\" must be a non-negative integer";
    return false;
  }
  *out = v->i;
  return true;
}

bool want_hex(const Json& o, const char* key, uint64_t* out, std::string* why) {
  const Json* v = o.get(key);
  if (v == nullptr || v->kind != Json::String || !parse_hex(v->s, out)) {
    *why = std::string("\"") + key + "\" must be a \"0x...\" string";
    return false;
  }
  return true;
}

bool want_site(const Json& o, const char* key, std::string* out, std::string* why) {
  const Json* v = o.get(key);
  if (v == nullptr || v->kind == Json::Null) return true;  // absent or null: no site
  if (v->kind != Json::String) {
    *why = std::string("\"") + key + "\" must be a string or null";
    return false;
  }
  *out = v->s;
  return true;
}

bool fill(const Json& o, LogEvent* e, std::string* why) {
  const Json* ev = o.get("ev");
  if (ev == nullptr || ev->kind != Json::String) {
    *why = "\"ev\" must be a string";
    return false;
  }
  if (!want_u64(o, "seq", &e->seq, why) || !want_u64(o, "t_ns", &e->t_ns, why) ||
      !want_hex(o, "ctx", &e->ctx, why))
    return false;
  const std::string& k = ev->s;
  if (k == "open") {
    e->kind = LogEvent::Open;
    const Json* b = o.get("backend");
    if (b != nullptr && b->kind == Json::String) e->backend = b->s;
    const Json* p = o.get("pool");
    e->pool_on = p != nullptr && p->kind == Json::Bool && p->b;
    const Json* r = o.get("redzone");
    if (r != nullptr && r->kind == Json::Int) e->redzone = r->i;
    return true;
  }
  if (k == "close") {
    e->kind = LogEvent::Close;
    return true;
  }
  if (k == "scan") {
    e->kind = LogEvent::Scan;
    return want_u64(o, "violations", &e->violations, why);
  }
  if (k == "alloc") e->kind = LogEvent::Alloc;
  else if (k == "free") e->kind = LogEvent::Free;
  else if (k == "oom") e->kind = LogEvent::Oom;
  else {
    *why = "unknown";
    return false;
  }
  if (!want_hex(o, "stream", &e->stream, why) || !want_u64(o, "bytes", &e->bytes, why) ||
      !want_site(o, "site", &e->site, why))
    return false;
  if (e->kind != LogEvent::Oom && !want_hex(o, "ptr", &e->ptr, why)) return false;
  const Json* kind = o.get("kind");
  e->managed = kind != nullptr && kind->kind == Json::String && kind->s == "managed";
  if (e->kind == LogEvent::Free) {
    if (!want_site(o, "free_site", &e->free_site, why)) return false;
    const Json* sw = o.get("sweep");
    e->sweep = sw != nullptr && sw->kind == Json::Bool && sw->b;
  }
  const Json* pool = o.get("pool");
  if (pool != nullptr && pool->kind == Json::Object) {
    const Json* r = pool->get("reserved");
    if (r != nullptr && r->kind == Json::Int) {
      e->pool_known = true;
      e->pool_reserved = r->i;
    }
  }
  return true;
}

}  // namespace

bool read_event_log(const std::string& path, std::vector<LogEvent>* out, std::string* error) {
  std::ifstream in(path);
  if (!in) {
    *error = path + ": cannot open for reading";
    return false;
  }
  std::string text;
  size_t line_no = 0;
  out->clear();
  while (std::getline(in, text)) {
    ++line_no;
    if (text.empty() || text.find_first_not_of(" \t\r") == std::string::npos) continue;
    Json o;
    std::string why;
    if (!parse_json(text, &o, &why)) {
      *error = path + ":" + std::to_string(line_no) + ": not JSON " + why;
      return false;
    }
    if (o.kind != Json::Object) {
      *error = path + ":" + std::to_string(line_no) + ": not a JSON object";
      return false;
    }
    LogEvent e;
    e.line_no = line_no;
    if (!fill(o, &e, &why)) {
      if (why == "unknown") continue;
      *error = path + ":" + std::to_string(line_no) + ": " + why;
      return false;
    }
    out->push_back(std::move(e));
  }
  if (in.bad()) {
    *error = path + ": read error";
    return false;
  }
  std::stable_sort(out->begin(), out->end(), [](const LogEvent& a, const LogEvent& b) {
    return a.ctx != b.ctx ? a.ctx < b.ctx : a.seq < b.seq;
  });
  return true;
}

}  // namespace metrale_replay
