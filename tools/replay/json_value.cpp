#include "json_value.hpp"

#include <cstdlib>

namespace metrale_replay {
namespace {

struct Parser {
  const std::string& t;
  size_t p = 0;
  std::string err;
  int depth = 0;

  bool fail(const std::string& what) {
    if (err.empty()) err = "at column " + std::to_string(p + 1) + ": " + what;
    return false;
  }
  void ws() {
    while (p < t.size() && (t[p] == ' ' || t[p] == '\t' || t[p] == '\r' || t[p] == '\n')) ++p;
  }
  bool lit(const char* word) {
    size_t n = std::char_traits<char>::length(word);
    if (t.compare(p, n, word) != 0) return fail(std::string("expected ") + word);
    p += n;
    return true;
  }
  static void utf8(std::string& s, uint32_t c) {
    if (c < 0x80) {
      s += static_cast<char>(c);
    } else if (c < 0x800) {
      s += static_cast<char>(0xc0 | (c >> 6));
      s += static_cast<char>(0x80 | (c & 0x3f));
    } else if (c < 0x10000) {
      s += static_cast<char>(0xe0 | (c >> 12));
      s += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
      s += static_cast<char>(0x80 | (c & 0x3f));
    } else {
      s += static_cast<char>(0xf0 | (c >> 18));
      s += static_cast<char>(0x80 | ((c >> 12) & 0x3f));
      s += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
      s += static_cast<char>(0x80 | (c & 0x3f));
    }
  }
  bool hex4(uint32_t* v) {
    if (p + 4 > t.size()) return fail("short \\u escape");
    *v = 0;
    for (int k = 0; k < 4; ++k) {
      char c = t[p++];
      *v <<= 4;
      if (c >= '0' && c <= '9') *v |= static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') *v |= static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') *v |= static_cast<uint32_t>(c - 'A' + 10);
      else return fail("bad \\u escape");
    }
    return true;
  }
  bool string(std::string* s) {
    ++p;  // opening quote
    while (true) {
      if (p >= t.size()) return fail("unterminated string");
      char c = t[p++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return fail("control character in a string");
      if (c != '\\') {
        *s += c;
        continue;
      }
      if (p >= t.size()) return fail("unterminated escape");
      char e = t[p++];
      switch (e) {
        case '"': case '\\': case '/': *s += e; break;
        case 'b': *s += '\b'; break;
        case 'f': *s += '\f'; break;
        case 'n': *s += '\n'; break;
        case 'r': *s += '\r'; break;
        case 't': *s += '\t'; break;
        case 'u': {
          uint32_t c1 = 0;
          if (!hex4(&c1)) return false;
          if (c1 >= 0xd800 && c1 < 0xdc00 && t.compare(p, 2, "\\u") == 0) {
            p += 2;
            uint32_t c2 = 0;
            if (!hex4(&c2)) return false;
            if (c2 < 0xdc00 || c2 >= 0xe000) return fail("bad surrogate pair");
            c1 = 0x10000 + ((c1 - 0xd800) << 10) + (c2 - 0xdc00);
          } else if (c1 >= 0xd800 && c1 < 0xe000) {
            c1 = 0xfffd;  // a lone surrogate
          }
          utf8(*s, c1);
          break;
        }
        default: return fail("bad escape");
      }
    }
  }
  bool number(Json* v) {
    size_t start = p;
    if (t[p] == '-') ++p;
    while (p < t.size() && t[p] >= '0' && t[p] <= '9') ++p;
    bool integer = true;
    if (p < t.size() && t[p] == '.') {
      integer = false;
      ++p;
      while (p < t.size() && t[p] >= '0' && t[p] <= '9') ++p;
    }
    if (p < t.size() && (t[p] == 'e' || t[p] == 'E')) {
      integer = false;
      ++p;
      if (p < t.size() && (t[p] == '+' || t[p] == '-')) ++p;
      while (p < t.size() && t[p] >= '0' && t[p] <= '9') ++p;
    }
    std::string text = t.substr(start, p - start);
    if (text.empty() || text == "-") return fail("bad number");
    v->d = std::strtod(text.c_str(), nullptr);
    if (integer && text[0] != '-') {
      // Exact: byte counts and times may pass 2^53.
      uint64_t n = 0;
      for (char c : text) {
        const uint64_t digit = static_cast<uint64_t>(c - '0');
        if (n > (UINT64_MAX - digit) / 10) return fail("integer past 2^64-1");
        n = n * 10 + digit;
      }
      v->kind = Json::Int;
      v->i = n;
    } else {
      v->kind = Json::Real;
    }
    return true;
  }
  bool value(Json* v) {
    ws();
    if (p >= t.size()) return fail("unexpected end of line");
    if (++depth > 32) return fail("nested too deep");
    bool ok = true;
    char c = t[p];
    if (c == '{') {
      v->kind = Json::Object;
      ++p;
      ws();
      if (p < t.size() && t[p] == '}') {
        ++p;
      } else {
        while (ok) {
          ws();
          if (p >= t.size() || t[p] != '"') { ok = fail("expected a key"); break; }
          std::string key;
          if (!string(&key)) { ok = false; break; }
          ws();
          if (p >= t.size() || t[p] != ':') { ok = fail("expected ':'"); break; }
          ++p;
          Json item;
          if (!value(&item)) { ok = false; break; }
          v->fields[key] = std::move(item);
          ws();
          if (p < t.size() && t[p] == ',') { ++p; continue; }
          if (p < t.size() && t[p] == '}') { ++p; break; }
          ok = fail("expected ',' or '}'");
        }
      }
    } else if (c == '[') {
      v->kind = Json::Array;
      ++p;
      ws();
      if (p < t.size() && t[p] == ']') {
        ++p;
      } else {
        while (ok) {
          Json item;
          if (!value(&item)) { ok = false; break; }
          v->items.push_back(std::move(item));
          ws();
          if (p < t.size() && t[p] == ',') { ++p; continue; }
          if (p < t.size() && t[p] == ']') { ++p; break; }
          ok = fail("expected ',' or ']'");
        }
      }
    } else if (c == '"') {
      v->kind = Json::String;
      ok = string(&v->s);
    } else if (c == 't') {
      v->kind = Json::Bool;
      v->b = true;
      ok = lit("true");
    } else if (c == 'f') {
      v->kind = Json::Bool;
      ok = lit("false");
    } else if (c == 'n') {
      ok = lit("null");
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      ok = number(v);
    } else {
      ok = fail(std::string("unexpected '") + c + "'");
    }
    --depth;
    return ok;
  }
};

}  // namespace

const Json* Json::get(const std::string& key) const {
  if (kind != Object) return nullptr;
  auto it = fields.find(key);
  return it == fields.end() ? nullptr : &it->second;
}

bool parse_json(const std::string& text, Json* out, std::string* error) {
  Parser ps{text, 0, std::string(), 0};
  Json v;
  if (!ps.value(&v)) {
    *error = ps.err;
    return false;
  }
  ps.ws();
  if (ps.p != text.size()) {
    ps.fail("text after the value");
    *error = ps.err;
    return false;
  }
  *out = std::move(v);
  return true;
}

}  // namespace metrale_replay
