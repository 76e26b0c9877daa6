#include "base/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <exception>

#include "base/error.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace triad {
namespace {

// How long an idle or waiting thread polls before it sleeps. Long enough to bridge the serial
// gaps between the parallel regions of one decode step (a few microseconds each), short enough
// that a thread waiting on a descheduled one soon frees its core for it.
constexpr int64_t kSpinMicros = 50;

inline void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

// Polls pred() for up to kSpinMicros; true if it held.
template <typename P>
bool spin_until(P&& pred) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::microseconds(kSpinMicros);
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (pred()) return true;
      cpu_relax();
    }
    if (Clock::now() >= deadline) return pred();
  }
}

// The pool whose job this thread is running (nested submits are refused).
thread_local const ThreadPool* t_running = nullptr;
struct Running {
  const ThreadPool* prev;
  explicit Running(const ThreadPool* p) : prev(t_running) { t_running = p; }
  ~Running() { t_running = prev; }
};

// The state word: seq (bits 33..63) | run() flag (bit 32) | chunks (16..31) | next (0..15).
constexpr uint64_t kAllFlag = uint64_t{1} << 32;
inline uint64_t seq_of(uint64_t w) { return w >> 33; }
inline bool all_of(uint64_t w) { return (w & kAllFlag) != 0; }
inline int64_t chunks_of(uint64_t w) { return static_cast<int64_t>((w >> 16) & 0xFFFF); }
inline int64_t next_of(uint64_t w) { return static_cast<int64_t>(w & 0xFFFF); }

}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  workers_.reserve(n_threads_ - 1);
  for (int t = 1; t < n_threads_; ++t) workers_.emplace_back([this, t] { worker_main(t); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  wake_.fetch_add(1, std::memory_order_acq_rel);
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::wait_done(std::atomic<int>& counter, int target) {
  if (spin_until([&] { return counter.load(std::memory_order_seq_cst) == target; })) return;
  for (int v = counter.load(std::memory_order_seq_cst); v != target; v = counter.load(std::memory_order_seq_cst))
    counter.wait(v, std::memory_order_seq_cst);
}

void ThreadPool::run_chunks(uint64_t w, int tid) {
  const Running running(this);
  const uint64_t seq = seq_of(w);
  for (;;) {
    if (seq_of(w) != seq || next_of(w) >= chunks_of(w)) return;
    // The claim compares the whole word, so it fails if the job has moved on.
    if (!state_.compare_exchange_weak(w, w + 1, std::memory_order_acq_rel, std::memory_order_acquire))
      continue;
    const int64_t c = next_of(w);
    const int n = static_cast<int>(chunks_of(w));
    // The job cannot end before this chunk is done, so job_ is still this job's.
    job_.call(job_.ctx, c, tid, n_threads_);
    // Sequentially consistent with the submitter's store of a lowered target and its reads of
    // done_ (a throw on the submitting thread): either it sees this chunk counted, or this
    // thread sees the new target and wakes it.
    const int d = done_.fetch_add(1, std::memory_order_seq_cst) + 1;
    if (d == n || d == done_target_.load(std::memory_order_seq_cst)) done_.notify_one();
    w = state_.load(std::memory_order_acquire);
  }
}

void ThreadPool::submit(const Job& job, int64_t n_chunks) {
  TRIAD_CHECK(n_chunks >= 0 && n_chunks <= kMaxChunks, "thread pool: ", n_chunks, " chunks");
  TRIAD_CHECK(t_running != this, "thread pool: a job submitted to the pool it runs on");
  if (n_threads_ == 1) {
    const Running running(this);
    if (n_chunks == 0) {
      job.call(job.ctx, 0, 0, 1);
    } else {
      for (int64_t c = 0; c < n_chunks; ++c) job.call(job.ctx, c, 0, 1);
    }
    return;
  }
  const bool leased = holder_.load(std::memory_order_relaxed) == std::this_thread::get_id();
  if (!leased) acquire();
  job_ = job;
  const uint64_t seq = (seq_of(state_.load(std::memory_order_relaxed)) + 1) & ((uint64_t{1} << 31) - 1);
  uint64_t w = seq << 33;
  if (n_chunks == 0) {
    w |= kAllFlag;
    pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  } else {
    w |= static_cast<uint64_t>(n_chunks) << 16;
    done_.store(0, std::memory_order_relaxed);
    done_target_.store(static_cast<int>(n_chunks), std::memory_order_relaxed);
  }
  state_.store(w, std::memory_order_release);
  wake_.fetch_add(1, std::memory_order_acq_rel);
  wake_.notify_all();
  // fn must not throw; if it does on this thread all the same (the engine catches a failed
  // step), the job is closed before the exception leaves: no chunk is claimed any more, the
  // workers' claimed chunks finish (their fn and its frame are still alive), and the pool is
  // released, so the next job starts clean.
  std::exception_ptr failed;
  if (n_chunks == 0) {
    try {
      const Running running(this);
      job.call(job.ctx, 0, 0, n_threads_);
    } catch (...) {
      failed = std::current_exception();
    }
    wait_done(pending_, 0);
  } else {
    int target = static_cast<int>(n_chunks);
    try {
      run_chunks(w, 0);
    } catch (...) {
      failed = std::current_exception();
      uint64_t cur = state_.load(std::memory_order_acquire);
      while (next_of(cur) < chunks_of(cur) &&
             !state_.compare_exchange_weak(cur, cur - static_cast<uint64_t>(next_of(cur)) + static_cast<uint64_t>(chunks_of(cur)),
                                           std::memory_order_acq_rel, std::memory_order_acquire)) {
      }
      // Chunks claimed: next at the close; this thread's failed one never counts as done.
      target = static_cast<int>(std::min(next_of(cur), chunks_of(cur))) - 1;
      // The workers notify at this count now (before, only at all n_chunks, which a failed
      // chunk never lets done_ reach: a sleeping wait here was never woken).
      done_target_.store(target, std::memory_order_seq_cst);
    }
    wait_done(done_, target);
  }
  if (!leased) release();
  if (failed) std::rethrow_exception(failed);
}

void ThreadPool::acquire() {
  using Clock = std::chrono::steady_clock;
  const std::thread::id me = std::this_thread::get_id();
  std::unique_lock<std::mutex> lk(lock_mu_);
  share_.arrive(me);
  if (reserved_ == me) {  // release() kept the pool for this thread's next turn
    reserved_ = std::thread::id();
    held_ = true;
    share_.serve(me);
  } else if (!held_ && reserved_ == std::thread::id() && waiters_.empty()) {
    held_ = true;
    share_.serve(me);
  } else {
    Waiter w{me};
    waiters_.push_back(&w);
    while (!w.granted) {
      if (reserved_ == std::thread::id()) {
        lock_cv_.wait(lk);
        continue;
      }
      // The pool is kept for a thread that has held it least; if it has not come back by the
      // deadline (an engine gone idle), the waiters get their turns.
      lock_cv_.wait_until(lk, reserve_until_);
      if (!w.granted && reserved_ != std::thread::id() && Clock::now() >= reserve_until_) {
        reserved_ = std::thread::id();
        hand_over();
      }
    }
  }
  held_since_ = Clock::now();
  holder_.store(me, std::memory_order_relaxed);
}

size_t ThreadPool::next_waiter() const {
  size_t best = 0;
  for (size_t i = 1; i < waiters_.size(); ++i)
    if (share_.clock(waiters_[i]->id) < share_.clock(waiters_[best]->id)) best = i;
  return best;
}

void ThreadPool::hand_over() {
  const size_t next = next_waiter();
  Waiter* w = waiters_[next];
  waiters_.erase(waiters_.begin() + static_cast<std::ptrdiff_t>(next));
  share_.serve(w->id);
  held_ = true;
  w->granted = true;
  lock_cv_.notify_all();
}

void ThreadPool::release() {
  using Clock = std::chrono::steady_clock;
  const std::thread::id me = std::this_thread::get_id();
  const std::lock_guard<std::mutex> lk(lock_mu_);
  const Clock::time_point now = Clock::now();
  share_.charge(me, std::chrono::duration<double>(now - held_since_).count());
  holder_.store(std::thread::id(), std::memory_order_relaxed);
  held_ = false;
  if (waiters_.empty()) return;
  // A releasing engine comes back for its next step within a few milliseconds: if it has still
  // held the pool less than every waiter, the pool is kept for it that long (two engines would
  // otherwise alternate step by step, and the one with the shorter steps would get less time).
  if (share_.clock(me) < share_.clock(waiters_[next_waiter()]->id)) {
    reserved_ = me;
    reserve_until_ = now + std::chrono::microseconds(kReserveMicros);
    lock_cv_.notify_all();  // the waiters now wait for the deadline
    return;
  }
  hand_over();
}

ThreadPool::Lease::Lease(ThreadPool& pool) : pool_(pool) {
  TRIAD_CHECK(pool.holder_.load(std::memory_order_relaxed) != std::this_thread::get_id(),
              "thread pool: this thread already holds a lease");
  pool_.acquire();
}

ThreadPool::Lease::~Lease() { pool_.release(); }

void ThreadPool::worker_main(int tid) {
  uint64_t seen = 0;  // the sequence of the last job this thread looked at
  for (;;) {
    uint64_t w = state_.load(std::memory_order_acquire);
    if (seq_of(w) == seen && !stop_.load(std::memory_order_acquire)) {
      if (!spin_until([&] {
            return seq_of(state_.load(std::memory_order_acquire)) != seen ||
                   stop_.load(std::memory_order_relaxed);
          })) {
        // Sleep until a job is published: read the wake counter first, then re-check, so a
        // job published in between is not slept through.
        for (;;) {
          const uint32_t k = wake_.load(std::memory_order_acquire);
          if (seq_of(state_.load(std::memory_order_acquire)) != seen || stop_.load(std::memory_order_acquire))
            break;
          wake_.wait(k, std::memory_order_acquire);
        }
      }
      continue;
    }
    if (stop_.load(std::memory_order_acquire)) return;
    seen = seq_of(w);
    if (all_of(w)) {
      // A run() job cannot end without this thread, so job_ is still its own.
      {
        const Running running(this);
        job_.call(job_.ctx, 0, tid, n_threads_);
      }
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
    } else {
      run_chunks(w, tid);
    }
  }
}

}  // namespace triad
