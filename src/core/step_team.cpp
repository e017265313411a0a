// StepTeam's hand-off (include/anuvad/core/step_team.h).
#include "anuvad/core/step_team.h"

#include <immintrin.h>
#include <sched.h>

namespace anuvad {

thread_local StepTeam* StepTeam::current_ = nullptr;
std::atomic<uint64_t> StepTeam::started_{0};

void spin_relax(uint32_t polls) {
  if (polls < 4096 || (polls & 63) != 0) _mm_pause();
  else sched_yield();
}

namespace {

/// Spins while pred() holds (spin_relax per poll).
template <typename Pred>
void spin_while(Pred&& pred) {
  for (uint32_t polls = 0; pred(); ++polls) spin_relax(polls);
}

}  // namespace

void StepTeam::post(Call call, const void* fn) {
  call_ = call;
  fn_ = fn;
  pending_.store(size_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);  // publishes call_, fn_, pending_
}

void StepTeam::wait_done() {
  spin_while([this] { return pending_.load(std::memory_order_acquire) != 0; });
}

void StepTeam::stop() {
  stopping_ = true;
  generation_.fetch_add(1, std::memory_order_release);
}

void StepTeam::serve(int t) {
  uint64_t seen = 0;
  for (;;) {
    spin_while([&] { return generation_.load(std::memory_order_acquire) == seen; });
    seen = generation_.load(std::memory_order_acquire);
    if (stopping_) return;
    call_(fn_, t, size_);
    pending_.fetch_sub(1, std::memory_order_release);  // publishes this thread's writes
  }
}

}  // namespace anuvad
