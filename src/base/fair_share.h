// FairShare: the clocks by which a shared ThreadPool chooses which waiting submitter to serve
// next, so that engines of several models share the cores by time, not by turns.
//
// Served in turn (first come, first served), two busy engines alternate steps: a model whose
// step takes 45 ms and one whose step takes 15 ms then hold the cores 75% and 25% of the time,
// and the small model keeps a quarter of its solo throughput. Here every submitter has a clock
// of the time it has held the pool; the pool serves the waiter with the least clock next, so
// busy submitters each get an equal share of the time, whatever their step lengths.
//
// A submitter that arrives new, or after idling, would otherwise hold the pool until its clock
// caught up with the others'. On arrival its clock is raised to the floor (the clock of the
// most recently served submitter) minus `slack`: it gets at most `slack` seconds ahead of its
// equal share. A clock at or below floor - slack is therefore the same as no clock, and such
// entries are dropped when the table grows (`kPrune` entries), so it stays small whatever the
// number of submitter threads over time.
//
// Thread-safety: none; the pool calls it under its own mutex.
#pragma once

#include <cstddef>
#include <thread>
#include <unordered_map>

namespace triad {

class FairShare {
 public:
  using Id = std::thread::id;
  static constexpr size_t kPrune = 64;

  explicit FairShare(double slack_seconds = 0.05) : slack_(slack_seconds) {}

  // `id` starts waiting for (or takes) the pool.
  void arrive(Id id);
  // `id` is served (takes the pool).
  void serve(Id id);
  // `id` held the pool for `seconds`.
  void charge(Id id, double seconds);

  double clock(Id id) const;
  size_t size() const { return clock_.size(); }

 private:
  std::unordered_map<Id, double> clock_;
  double floor_ = 0;
  double slack_;
};

}  // namespace triad
