// StopMatcher: stop strings split across pieces never leak, not even partly.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "server/stop_matcher.h"

namespace triad::server {
namespace {

// Feeds `text` in pieces at the given cut points; returns what was emitted and whether it stopped.
std::pair<std::string, bool> run(const std::vector<std::string>& stops, const std::string& text,
                                 const std::vector<size_t>& cuts) {
  StopMatcher m(stops);
  std::string out;
  size_t prev = 0;
  for (size_t c : cuts) {
    out += m.feed(text.substr(prev, c - prev));
    prev = c;
  }
  out += m.feed(text.substr(prev));
  out += m.flush();
  return {out, m.stopped()};
}

TEST(StopMatcherTest, CutsRightBeforeTheFirstStopString) {
  EXPECT_EQ(run({"\n\n"}, "Hello\n\nWorld", {3, 6}), std::make_pair(std::string("Hello"), true));
  EXPECT_EQ(run({"World", "lo"}, "Hello World", {2}), std::make_pair(std::string("Hel"), true));
  EXPECT_EQ(run({"xyz"}, "no stop here", {4, 8}), std::make_pair(std::string("no stop here"), false));
  EXPECT_EQ(run({"abc"}, "ab", {1}), std::make_pair(std::string("ab"), false));  // held, then flushed
}

TEST(StopMatcherTest, NothingOfAStopStringIsEverEmitted) {
  std::mt19937 rng(5);
  const std::string alphabet = "ab\n ";
  for (int trial = 0; trial < 2000; ++trial) {
    std::string text, stop;
    for (int i = 0; i < 40; ++i) text += alphabet[rng() % alphabet.size()];
    for (int i = 0; i < 1 + static_cast<int>(rng() % 4); ++i) stop += alphabet[rng() % alphabet.size()];
    StopMatcher m({stop});
    std::string out;
    size_t pos = 0;
    while (pos < text.size()) {
      const size_t n = 1 + rng() % 5;
      const std::string piece = text.substr(pos, n);
      pos += n;
      const std::string got = m.feed(piece);
      out += got;
      // What was emitted so far is a prefix of the text that does not contain the stop string.
      ASSERT_EQ(text.compare(0, out.size(), out), 0);
      ASSERT_EQ(out.find(stop), std::string::npos);
    }
    out += m.flush();
    const size_t at = text.find(stop);
    EXPECT_EQ(out, at == std::string::npos ? text : text.substr(0, at)) << "stop '" << stop << "'";
    EXPECT_EQ(m.stopped(), at != std::string::npos);
  }
}

}  // namespace
}  // namespace triad::server
