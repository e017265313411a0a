// One parallel region held across a whole decoding step, so that the step's split matrix products
// hand their column ranges to the other threads without an OpenMP fork/join each (issue #15: a
// batch-1 step of the base model splits ~49 products, and a fork/join costs 2-6 µs on the 2-core
// hosts measured, a large share of a ~1 ms step).
#pragma once

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <type_traits>
#include <utility>

namespace anuvad {

/// One poll of a spin-wait that has polled `polls` times before: a pause, and from 4,096 polls
/// on a sched_yield every 64, so that a waiting thread gives its core away when the machine has
/// more threads than cores (StepTeam's workers, training shards summing while they wait).
void spin_relax(uint32_t polls);

/// A team of OpenMP threads: thread 0 runs the caller's body; the others wait (spinning, then
/// yielding) for work that thread 0 posts with split(), run their share, and wait again. While
/// thread 0 runs serial code the others spin, as OpenMP's own threads do between regions.
/// Not copyable; one per run().
class StepTeam {
 public:
  /// Runs body() on the calling thread as thread 0 of a new OpenMP team of `threads` threads
  /// (at most kMaxThreads; fewer if OpenMP gives fewer); inside body, current() returns the
  /// team. With threads < 2, inside a parallel region or inside another team's body, body()
  /// runs alone and current() keeps its value (null, or that outer team). Rethrows what body
  /// throws, after the team has ended.
  template <typename Body>
  static void run(int threads, Body&& body);

  /// The team whose body the calling thread is running (thread 0 only), or nullptr.
  static StepTeam* current() { return current_; }

  /// How many teams of ≥ 2 threads run() has started in this process (tests check that a path
  /// took a team).
  static uint64_t teams_started() { return started_.load(std::memory_order_relaxed); }

  /// Most threads a team holds (run() asks OpenMP for no more).
  static constexpr int kMaxThreads = 64;

  /// Number of threads in the team (≥ 2).
  int size() const { return post_.size; }

  /// Calls fn(t, size()) once on every team thread t (t = 0 on the caller) and returns when all
  /// have returned. fn must not throw; it runs concurrently, so calls must write disjoint data.
  template <typename Fn>
  void split(Fn&& fn) {
    using F = std::remove_reference_t<Fn>;
    const auto call = [](const void* f, int t, int nt) { (*static_cast<const F*>(f))(t, nt); };
    post(call, static_cast<const void*>(&fn));
    fn(0, post_.size);
    wait_done();
  }

 private:
  using Call = void (*)(const void*, int, int);
  StepTeam() = default;
  void post(Call call, const void* fn);
  void wait_done();
  void serve(int t);  ///< threads 1.. : run posted work until stop
  void stop();

  static thread_local StepTeam* current_;
  static std::atomic<uint64_t> started_;
  /// What a worker reads to start, in one cache line: one transfer from thread 0 to each worker
  /// per hand-off.
  struct alignas(64) Post {
    std::atomic<uint64_t> generation{0};  ///< bumped by post() and stop(); publishes the rest
    Call call = nullptr;
    const void* fn = nullptr;
    int size = 1;  ///< threads in the team, set by run() before the first post
    bool stopping = false;
  };
  /// A worker's last finished generation, in a line of its own that only it writes and thread 0
  /// only reads (a counter that both decrement and read costs one more transfer per hand-off:
  /// 0.87 against 0.45-0.6 µs per empty split on the 2-vCPU Zen 5 host).
  struct alignas(64) Done {
    std::atomic<uint64_t> generation{0};
  };
  Post post_;
  Done done_[kMaxThreads];  ///< [t] for workers t ≥ 1 (done_[0] unused)
};

template <typename Body>
void StepTeam::run(int threads, Body&& body) {
  if (threads < 2 || current_ != nullptr || omp_in_parallel()) return body();
  StepTeam team;
  std::exception_ptr error;
#pragma omp parallel num_threads(std::min(threads, kMaxThreads))
  {
    // No barrier: the workers poll post_.generation and read post_'s other fields only after
    // post() or stop() has published them.
    if (omp_get_thread_num() == 0) {
      team.post_.size = omp_get_num_threads();
      if (team.post_.size > 1) {
        current_ = &team;
        started_.fetch_add(1, std::memory_order_relaxed);
      }
      try {
        body();
      } catch (...) {
        error = std::current_exception();
      }
      current_ = nullptr;
      if (team.post_.size > 1) team.stop();
    } else {
      team.serve(omp_get_thread_num());
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace anuvad
