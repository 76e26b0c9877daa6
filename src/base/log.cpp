#include "base/log.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <deque>
#include <mutex>
#include <thread>

namespace triad {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
std::atomic<int> g_format{static_cast<int>(LogFormat::kText)};
std::mutex g_mu;
const char* const kNames[] = {"debug", "info", "warn", "error"};

// The length of the valid UTF-8 sequence starting at s[i] (RFC 3629: no overlong forms, no
// surrogates, nothing above U+10FFFF), or 0 when none starts there.
size_t utf8_length(const std::string& s, size_t i) {
  const auto at = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = at(i);
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + n > s.size() || at(i + 1) < lo || at(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if (at(i + k) < 0x80 || at(i + k) > 0xBF) return 0;
  return n;
}

// A JSON string literal of arbitrary bytes: control characters escaped, valid UTF-8 as it is,
// each byte of invalid UTF-8 as \ufffd (the replacement character), so the line stays valid JSON.
std::string quote(const std::string& s) {
  std::string o = "\"";
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\r': o += "\\r"; break;
      case '\t': o += "\\t"; break;
      default:
        if (c < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", c);
          o += b;
        } else if (c < 0x80) {
          o += static_cast<char>(c);
        } else if (const size_t n = utf8_length(s, i); n > 0) {
          o.append(s, i, n);
          i += n - 1;
        } else {
          o += "\\ufffd";
        }
    }
  }
  return o + "\"";
}

std::string now_iso() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char b[96];
  std::snprintf(b, sizeof b, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  return b;
}

void write_now(const std::string& line) {
  std::lock_guard<std::mutex> lock(g_mu);
  std::fprintf(stderr, "%s\n", line.c_str());
}

// The asynchronous writer (start_log_writer): a bounded queue and the thread that empties it.
struct Writer {
  static constexpr size_t kMaxBytes = size_t{4} << 20;
  size_t max_lines = 8192;
  std::mutex mu;
  std::condition_variable cv, drained;
  std::deque<std::string> queue;
  size_t bytes = 0;
  bool running = false, stopping = false, busy = false;
  uint64_t dropped_unreported = 0;
  std::thread thread;

  void loop() {
    std::unique_lock<std::mutex> lk(mu);
    for (;;) {
      cv.wait(lk, [&] { return stopping || !queue.empty() || dropped_unreported > 0; });
      if (queue.empty() && dropped_unreported == 0) break;  // stopping, nothing left
      std::deque<std::string> batch;
      batch.swap(queue);
      bytes = 0;
      const uint64_t dropped = dropped_unreported;
      dropped_unreported = 0;
      busy = true;
      lk.unlock();
      for (const std::string& line : batch) write_now(line);
      if (dropped > 0)
        write_now("[triad] warn: " + std::to_string(dropped) + " log lines were dropped: stderr was not being read fast enough");
      lk.lock();
      busy = false;
      drained.notify_all();
    }
  }
};
Writer g_writer;
std::atomic<bool> g_async{false};
std::atomic<uint64_t> g_dropped{0};

void write(const std::string& line) {
  if (g_async.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lk(g_writer.mu);
    if (g_writer.running && !g_writer.stopping) {
      if (g_writer.queue.size() >= g_writer.max_lines || g_writer.bytes + line.size() > Writer::kMaxBytes) {
        ++g_writer.dropped_unreported;
        g_dropped.fetch_add(1, std::memory_order_relaxed);
      } else {
        g_writer.bytes += line.size();
        g_writer.queue.push_back(line);
      }
      g_writer.cv.notify_one();
      return;
    }
  }
  write_now(line);
}
}  // namespace

void start_log_writer(size_t max_lines) {
  std::lock_guard<std::mutex> lk(g_writer.mu);
  if (g_writer.running) return;
  g_writer.max_lines = std::max<size_t>(1, max_lines);
  g_writer.running = true;
  g_writer.stopping = false;
  g_writer.thread = std::thread([] { g_writer.loop(); });
  g_async.store(true, std::memory_order_release);
}

void stop_log_writer(double drain_s) {
  {
    std::unique_lock<std::mutex> lk(g_writer.mu);
    if (!g_writer.running) return;
    // Give the writer drain_s to empty the queue; a stuck stderr then loses the rest, not the exit.
    g_writer.drained.wait_for(lk, std::chrono::duration<double>(drain_s),
                              [] { return g_writer.queue.empty() && !g_writer.busy; });
    if (!g_writer.queue.empty() || g_writer.busy) {
      g_dropped.fetch_add(g_writer.queue.size(), std::memory_order_relaxed);
      g_writer.queue.clear();
      g_writer.bytes = 0;
      g_writer.dropped_unreported = 0;
    }
    g_writer.stopping = true;
    g_async.store(false, std::memory_order_release);
  }
  g_writer.cv.notify_all();
  // A writer stuck in write(2) on a stuck stderr cannot be joined: it is left to the exit.
  std::unique_lock<std::mutex> lk(g_writer.mu);
  const bool idle = g_writer.drained.wait_for(lk, std::chrono::seconds(1), [] { return !g_writer.busy; });
  lk.unlock();
  if (idle) {
    g_writer.thread.join();
  } else {
    g_writer.thread.detach();
  }
  lk.lock();
  g_writer.running = false;
}

uint64_t log_lines_dropped() { return g_dropped.load(std::memory_order_relaxed); }

void set_log_level(LogLevel level) { g_level.store(static_cast<int>(level)); }
LogLevel log_level() { return static_cast<LogLevel>(g_level.load()); }
void set_log_format(LogFormat format) { g_format.store(static_cast<int>(format)); }
LogFormat log_format() { return static_cast<LogFormat>(g_format.load()); }

void log_line(LogLevel level, const std::string& message) {
  if (static_cast<int>(level) < g_level.load()) return;
  const char* name = kNames[static_cast<int>(level)];
  std::string line;
  if (log_format() == LogFormat::kJson) {
    line.append("{\"ts\":\"").append(now_iso()).append("\",\"level\":\"").append(name).append("\",\"msg\":");
    line.append(quote(message)).append("}");
  } else {
    line.append("[triad] ").append(name).append(": ").append(message);
  }
  write(line);
}

LogField log_field(const std::string& key, const std::string& value) { return {key, value, false}; }
LogField log_field(const std::string& key, double value) {
  if (!std::isfinite(value)) return {key, "null", true};
  char b[32];
  std::snprintf(b, sizeof b, "%.6g", value);
  return {key, b, true};
}
LogField log_field(const std::string& key, int64_t value) { return {key, std::to_string(value), true}; }

void log_event(const std::string& event, const std::vector<LogField>& fields) {
  if (g_level.load() > static_cast<int>(LogLevel::kInfo)) return;
  std::string line;
  if (log_format() == LogFormat::kJson) {
    line.append("{\"ts\":\"").append(now_iso()).append("\",\"level\":\"info\",\"event\":").append(quote(event));
    for (const LogField& f : fields) line.append(",").append(quote(f.key)).append(":").append(f.number ? f.value : quote(f.value));
    line.append("}");
  } else {
    line.append("[triad] info: ").append(event);
    for (const LogField& f : fields) line.append(" ").append(f.key).append("=").append(f.value);
  }
  write(line);
}

}  // namespace triad
