// A fixed pool of worker threads that runs one parallel job at a time.
//
// Properties:
// - The calling thread takes part as thread 0, so a pool of N threads starts N-1 workers.
// - Work is claimed, not assigned: for_each_chunk() and parallel_for() cut a job into chunks
//   that whichever pool threads are running take one at a time (an atomic claim). A worker that
//   the OS has descheduled (a busy neighbour process, another model's engine, the HTTP threads)
//   therefore holds up a job by at most the one chunk it has started, instead of its whole
//   share: the running threads take the rest. A job ends when its last chunk is done; threads
//   that never got to it do not delay it.
// - Chunks are fixed by the job's size and the pool's size, never by who runs them, so a
//   computation whose chunks are independent gives the same bits however the load falls.
// - run() is the other kind of job: fn runs once on every thread of the pool, and the job waits
//   for all of them. Use it only where that is the point (the bandwidth probe, per-thread
//   partial sums), since one descheduled thread stalls it.
// - Idle threads spin for a bounded time (about kSpinMicros, measured by the clock, not by
//   iterations) to catch the next job of a token-by-token decode loop, then sleep on a futex
//   (std::atomic::wait): an idle pool burns no cores, and a waiting thread soon gives its core
//   to the one it waits for.
// - Several threads may submit jobs to one pool (engines of several models sharing the cores).
//   The pool is held by one submitter at a time: for one job, or for as long as a Lease lives
//   (an engine leases the pool for a whole step, so two engines alternate by steps, not by
//   single products). When several wait, the one that has held the pool least gets it next
//   (FairShare, base/fair_share.h), and a releasing engine that has held it less than every
//   waiter keeps its turn for a few milliseconds: busy engines share the time equally, however
//   long their steps, and none starves.
//   Each submitter takes part in its own jobs as thread 0. A job's fn must not submit to the
//   same pool (refused with an error). A pool of one thread runs every job inline on its
//   caller, without the lock (only Leases are ordered there).
// - fn must not throw on a worker (that ends the process). If it throws on the submitting
//   thread, the job is closed (unclaimed chunks are dropped, claimed ones finish), the pool is
//   released and the exception propagates.
// Thread-safety: run(), for_each_chunk(), parallel_for() and Lease may be used from any
// threads; size() is constant.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/fair_share.h"

namespace triad {

class ThreadPool {
 public:
  // n_threads >= 1 counts the calling thread.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Holds the pool for the calling thread from construction to destruction: other threads'
  // jobs and leases wait (in arrival order); this thread's jobs run without waiting. Not
  // re-entrant (one Lease per thread at a time).
  class Lease {
   public:
    explicit Lease(ThreadPool& pool);
    ~Lease();
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;

   private:
    ThreadPool& pool_;
  };

  // The most chunks one job may have.
  static constexpr int64_t kMaxChunks = 65535;
  // parallel_for's chunks per pool thread: enough that the running threads can absorb a
  // descheduled one's share, few enough that claiming stays negligible.
  static constexpr int64_t kChunksPerThread = 4;

  // Calls fn(thread_index, n_threads) once on every thread of the pool and returns when all
  // calls have returned. fn must not throw.
  template <typename F>
  void run(F&& fn) {
    using Fn = std::remove_reference_t<F>;
    Job job{[](void* ctx, int64_t, int tid, int nth) { (*static_cast<Fn*>(ctx))(tid, nth); },
            const_cast<void*>(static_cast<const void*>(&fn))};
    submit(job, 0);
  }

  // Calls fn(chunk, thread_index) for every chunk in [0, n_chunks), each exactly once, on
  // whichever pool threads claim it; returns when all are done. thread_index (< size()) names
  // the calling thread, for per-thread scratch. Beyond kMaxChunks, consecutive chunks are
  // claimed in groups. fn must not throw.
  template <typename F>
  void for_each_chunk(int64_t n_chunks, F&& fn) {
    if (n_chunks <= 0) return;
    using Fn = std::remove_reference_t<F>;
    if (n_chunks > kMaxChunks) {
      struct Grouped {
        Fn* fn;
        int64_t per, n;
      } g{&fn, (n_chunks + kMaxChunks - 1) / kMaxChunks, n_chunks};
      Job job{[](void* ctx, int64_t k, int tid, int) {
                const Grouped& gr = *static_cast<const Grouped*>(ctx);
                const int64_t end = (k + 1) * gr.per < gr.n ? (k + 1) * gr.per : gr.n;
                for (int64_t c = k * gr.per; c < end; ++c) (*gr.fn)(c, tid);
              },
              &g};
      submit(job, (n_chunks + g.per - 1) / g.per);
      return;
    }
    Job job{[](void* ctx, int64_t c, int tid, int) { (*static_cast<Fn*>(ctx))(c, tid); },
            const_cast<void*>(static_cast<const void*>(&fn))};
    submit(job, n_chunks);
  }

  // Splits [0, n) into contiguous chunks (min(n, kChunksPerThread * size()) of them, boundaries
  // a function of n and size() only) and calls fn(begin, end) for each.
  template <typename F>
  void parallel_for(int64_t n, F&& fn) {
    if (n <= 0) return;
    const int64_t k = chunks_for(n);
    for_each_chunk(k, [&](int64_t c, int) { fn(n * c / k, n * (c + 1) / k); });
  }

  // The number of chunks parallel_for(n, ...) uses.
  int64_t chunks_for(int64_t n) const {
    const int64_t k = kChunksPerThread * n_threads_;
    return n < k ? n : k;
  }

 private:
  struct Job {
    void (*call)(void* ctx, int64_t chunk, int tid, int nth);
    void* ctx;
  };
  // n_chunks == 0: a run() job (every thread once); else a claimed job.
  void submit(const Job& job, int64_t n_chunks);
  void worker_main(int tid);
  // Claims and runs chunks of the job whose state word was `w` until none is left.
  void run_chunks(uint64_t w, int tid);
  void wait_done(std::atomic<int>& counter, int target);
  void acquire();  // the fair-share lock
  void release();
  // Under lock_mu_: the waiter that has held the pool least (the earliest on ties), and granting
  // it the pool.
  size_t next_waiter() const;
  void hand_over();

  int n_threads_;
  std::vector<std::thread> workers_;
  // The fair-share lock: under lock_mu_, whether the pool is held, the waiting submitters in
  // arrival order (each with a flag its grant sets) and every submitter's clock (FairShare).
  struct Waiter {
    std::thread::id id;
    bool granted = false;
  };
  std::mutex lock_mu_;
  std::condition_variable lock_cv_;
  bool held_ = false;
  std::vector<Waiter*> waiters_;
  // A releasing submitter that has held the pool less than every waiter keeps its turn until
  // reserve_until_ (kReserveMicros later): its next acquire() takes the pool at once.
  static constexpr int64_t kReserveMicros = 5000;
  std::thread::id reserved_{};
  std::chrono::steady_clock::time_point reserve_until_;
  FairShare share_;
  std::chrono::steady_clock::time_point held_since_;
  std::atomic<std::thread::id> holder_{};  // the thread that holds the pool, if any
  Job job_{nullptr, nullptr};
  // The job's state in one word, so that a thread that slept through a job can never claim a
  // chunk of the next one: sequence (31 bits) | run() flag (1) | chunks (16) | next chunk (16).
  alignas(64) std::atomic<uint64_t> state_{0};
  std::atomic<uint32_t> wake_{0};  // bumped once per job, for sleeping workers (futex)
  alignas(64) std::atomic<int> done_{0};  // claimed job: chunks finished
  // The done_ count the submitter waits for: the job's chunks, or after a throw on the
  // submitting thread the chunks others claimed; reaching it notifies.
  std::atomic<int> done_target_{0};
  std::atomic<int> pending_{0};           // run() job: workers still running it
  std::atomic<bool> stop_{false};
};

}  // namespace triad
