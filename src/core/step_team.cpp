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
  post_.call = call;
  post_.fn = fn;
  post_.generation.fetch_add(1, std::memory_order_release);  // publishes call and fn
}

void StepTeam::wait_done() {
  const uint64_t generation = post_.generation.load(std::memory_order_relaxed);
  for (int t = 1; t < post_.size; ++t)
    spin_while([&] { return done_[t].generation.load(std::memory_order_acquire) != generation; });
}

void StepTeam::stop() {
  post_.stopping = true;
  post_.generation.fetch_add(1, std::memory_order_release);
}

void StepTeam::serve(int t) {
  uint64_t seen = 0;
  for (;;) {
    spin_while([&] { return post_.generation.load(std::memory_order_acquire) == seen; });
    seen = post_.generation.load(std::memory_order_acquire);
    if (post_.stopping) return;
    post_.call(post_.fn, t, post_.size);
    done_[t].generation.store(seen, std::memory_order_release);  // publishes this thread's writes
  }
}

}  // namespace anuvad
