// Minimal leveled logging to stderr, as text ("[triad] info: message") or, for machines, as one
// JSON object per line ({"ts": ISO-8601 UTC, "level", "msg"}; events carry their fields instead
// of a message). Thread-safe (one line per call is written atomically).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/error.h"

namespace triad {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kOff = 4 };

void set_log_level(LogLevel level);
LogLevel log_level();
enum class LogFormat { kText, kJson };
void set_log_format(LogFormat format);
LogFormat log_format();

// One field of a structured event: numbers are written bare in JSON, text quoted.
struct LogField {
  std::string key;
  std::string value;
  bool number = false;
};
LogField log_field(const std::string& key, const std::string& value);
LogField log_field(const std::string& key, double value);
LogField log_field(const std::string& key, int64_t value);
// An info-level event: "[triad] info: EVENT key=value ..." or {"ts", "level", "event", fields...}.
void log_event(const std::string& event, const std::vector<LogField>& fields);
// Writes "[triad] LEVEL message" to stderr when level >= the current level.
void log_line(LogLevel level, const std::string& message);

// A server must not stall on its log: between start_log_writer() and stop_log_writer() lines go
// into a bounded queue (max_lines, 8,192 by default, or 4 MiB) that one writer thread empties into stderr, so a
// slow or stuck stderr (a full pipe, a blocked log driver) never blocks the engine or HTTP
// threads. When the queue is full, lines are dropped and counted, and the writer reports how many
// once it can write again. stop_log_writer() writes what is queued (for at most `drain_s`
// seconds) and joins the thread; lines logged after it are written directly again. Both are
// idempotent; call them from one thread (the server's main thread).
void start_log_writer(size_t max_lines = 8192);
void stop_log_writer(double drain_s = 5.0);
// Lines dropped because the queue was full, since the process started.
uint64_t log_lines_dropped();

template <typename... Args>
void log_info(Args&&... args) {
  if (log_level() <= LogLevel::kInfo) log_line(LogLevel::kInfo, detail::concat(args...));
}
template <typename... Args>
void log_warn(Args&&... args) {
  if (log_level() <= LogLevel::kWarn) log_line(LogLevel::kWarn, detail::concat(args...));
}
template <typename... Args>
void log_debug(Args&&... args) {
  if (log_level() <= LogLevel::kDebug) log_line(LogLevel::kDebug, detail::concat(args...));
}

}  // namespace triad
