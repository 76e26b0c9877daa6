// Compiled grammars of one served model, shared by the requests that ask for the same one:
// a bounded LRU keyed by the kind and text (json_object, a JSON schema, a GBNF grammar), so
// that a flood of distinct grammars costs at most `capacity` compiled forms and each repeated one
// is compiled, and its masks computed, once. A new grammar's first masks are computed by a short
// random walk on the calling (HTTP) thread, off the engine thread.
// Thread-safety: get() may be called from any thread.
#pragma once

#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/json_schema.h"
#include "grammar/matcher.h"

namespace triad::server {

class ConstraintCache {
 public:
  explicit ConstraintCache(std::shared_ptr<const grammar::Vocab> vocab, size_t capacity = 64)
      : vocab_(std::move(vocab)), capacity_(capacity) {}

  // kind: "json_object" (text ignored), "json_schema" / "json_schema_strict" (the schema as
  // JSON text, keys in declared order) or "grammar" (GBNF). Throws grammar::GrammarError.
  // `dropped`, when given, receives the keywords a non-strict schema had to drop
  // (json_schema.h).
  std::shared_ptr<grammar::Constraint> get(const std::string& kind, const std::string& text,
                                           std::vector<std::string>* dropped = nullptr) {
    const std::string key = kind + '\0' + (kind == "json_object" ? std::string() : text);
    {
      std::lock_guard<std::mutex> lk(mu_);
      auto it = index_.find(key);
      if (it != index_.end()) {
        lru_.splice(lru_.begin(), lru_, it->second);
        if (dropped) *dropped = it->second->second.dropped;
        return it->second->second.constraint;
      }
    }
    std::vector<std::string> dropped_here;
    std::string src;
    if (kind == "json_object") {
      src = grammar::json_object_gbnf();
    } else if (kind == "json_schema" || kind == "json_schema_strict") {
      nlohmann::ordered_json schema;
      try {
        schema = nlohmann::ordered_json::parse(text);
      } catch (const std::exception& e) {
        throw grammar::GrammarError(std::string("json_schema: not JSON: ") + e.what());
      }
      grammar::SchemaOptions so;
      so.strict = kind == "json_schema_strict";
      so.dropped = &dropped_here;
      src = grammar::json_schema_to_gbnf(schema, so);
    } else {
      src = text;
    }
    auto g = std::make_shared<const grammar::Grammar>(grammar::Grammar::from_gbnf(src));
    auto c = std::make_shared<grammar::Constraint>(std::move(g), vocab_);
    // Compute the masks near the grammar's start here, on the requesting thread, rather than
    // on the engine thread where a first-time vocabulary walk would stall every sequence.
    grammar::warm_up(c, 2, 48, 1);
    if (dropped) *dropped = dropped_here;
    std::lock_guard<std::mutex> lk(mu_);
    auto it = index_.find(key);
    if (it != index_.end()) return it->second->second.constraint;
    lru_.emplace_front(key, Entry{c, std::move(dropped_here)});
    index_[key] = lru_.begin();
    while (lru_.size() > capacity_) {
      index_.erase(lru_.back().first);
      lru_.pop_back();
    }
    return c;
  }
  const std::shared_ptr<const grammar::Vocab>& vocab() const { return vocab_; }

 private:
  std::shared_ptr<const grammar::Vocab> vocab_;
  size_t capacity_;
  std::mutex mu_;
  struct Entry {
    std::shared_ptr<grammar::Constraint> constraint;
    std::vector<std::string> dropped;
  };
  std::list<std::pair<std::string, Entry>> lru_;
  std::unordered_map<std::string, decltype(lru_)::iterator> index_;
};

}  // namespace triad::server
