// Tests of src/server/metrics.h: the recent-window percentiles of Histogram (nearest rank, found
// by selection) against a plain sort, for any order of asked percentiles, ties and edge sizes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "server/metrics.h"

namespace triad::server {
namespace {

double nearest_rank(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const auto k = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, k == 0 ? 0 : k - 1)];
}

TEST(Histogram, RecentPercentilesAreNearestRanks) {
  std::mt19937 rng(5);
  const std::vector<double> asked = {99, 50, 0, 90, 50, 100, 1};
  for (size_t n : {size_t{1}, size_t{2}, size_t{3}, size_t{10}, size_t{101}, size_t{5000}}) {
    Histogram h(ModelMetrics::latency_bounds());
    std::vector<double> all;
    for (size_t i = 0; i < n; ++i) {
      const double x = static_cast<double>(rng() % 50) / 7.0;  // many ties
      h.observe(x);
      all.push_back(x);
    }
    const Histogram::Recent r = h.recent(3600, asked);
    ASSERT_EQ(r.count, n);
    ASSERT_EQ(r.values.size(), asked.size());
    for (size_t i = 0; i < asked.size(); ++i) {
      ASSERT_TRUE(r.values[i].has_value());
      EXPECT_EQ(*r.values[i], nearest_rank(all, asked[i])) << "n " << n << " p " << asked[i];
    }
  }
}

TEST(Histogram, RecentWithNothingObserved) {
  Histogram h(ModelMetrics::latency_bounds());
  const Histogram::Recent r = h.recent(10, {50, 99});
  EXPECT_EQ(r.count, 0u);
  ASSERT_EQ(r.values.size(), 2u);
  EXPECT_FALSE(r.values[0].has_value());
  EXPECT_FALSE(r.values[1].has_value());
}

}  // namespace
}  // namespace triad::server
