// A fixed pool of worker threads that runs one parallel job at a time.
//
// Properties:
// - The calling thread takes part as thread 0, so a pool of N threads starts N-1 workers.
// - Idle workers spin briefly (to catch the next job of a token-by-token decode loop without a
//   wake-up delay) and then sleep on a futex (std::atomic::wait): an idle pool burns no cores.
// - run() is not re-entrant and must be called from one thread at a time (the owner).
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace triad {

class ThreadPool {
 public:
  // n_threads >= 1 counts the calling thread.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(thread_index, n_threads) once on every thread of the pool and returns when all
  // calls have returned. fn must not throw.
  template <typename F>
  void run(F&& fn) {
    using Fn = std::remove_reference_t<F>;
    Job job{[](void* ctx, int tid, int nth) { (*static_cast<Fn*>(ctx))(tid, nth); },
            const_cast<void*>(static_cast<const void*>(&fn))};
    dispatch(job);
  }

  // Splits [0, n) into contiguous chunks, one per thread, and calls fn(begin, end) for each
  // non-empty chunk.
  template <typename F>
  void parallel_for(int64_t n, F&& fn) {
    run([&](int tid, int nth) {
      int64_t begin = n * tid / nth, end = n * (tid + 1) / nth;
      if (begin < end) fn(begin, end);
    });
  }

 private:
  struct Job {
    void (*call)(void* ctx, int tid, int nth);
    void* ctx;
  };
  void dispatch(const Job& job);
  void worker_main(int tid);

  int n_threads_;
  std::vector<std::thread> workers_;
  Job job_{nullptr, nullptr};
  std::atomic<uint32_t> generation_{0};  // bumped once per job; workers wait for a change
  std::atomic<int> pending_{0};          // workers still running the current job
  std::atomic<bool> stop_{false};
};

}  // namespace triad
