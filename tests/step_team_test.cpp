// core/step_team.h: a team held across a decoding step runs every posted split exactly once per
// thread, passes exceptions out, and a batch-1 decoding step on it gives one thread's results.
#include <catch2/catch.hpp>

#include <omp.h>

#include <stdexcept>
#include <vector>

#include "anuvad/core/parallel.h"
#include "anuvad/core/step_team.h"
#include "anuvad/nn/transformer.h"
#include "support/gradcheck.h"
#include "support/test_support.h"

using namespace anuvad;

TEST_CASE("StepTeam: every split runs once per thread; serial code stays on thread 0", "[parallel]") {
  CHECK(StepTeam::current() == nullptr);
  const uint64_t started = StepTeam::teams_started();
  std::vector<int> calls(4, 0), wrong(4, 0);  // per thread: Catch2's CHECK is not thread-safe
  long long sum = 0;
  int size = 0;
  StepTeam::run(2, [&] {
    StepTeam* team = StepTeam::current();
    REQUIRE(team != nullptr);
    size = team->size();
    CHECK(split_threads() == size);
    for (int round = 0; round < 20000; ++round) {  // many hand-offs: a lost or doubled one shows
      std::vector<long long> part(size, 0);
      team->split([&](int t, int nt) {
        wrong[t] += nt != size;
        wrong[t] += StepTeam::current() != (t == 0 ? team : nullptr);  // workers see no team
        part[t] = round + t;
        calls[t] += round == 0;
      });
      for (long long p : part) sum += p;
    }
    StepTeam::run(2, [&] { CHECK(StepTeam::current() == team); });  // nested: the body alone
  });
  CHECK(StepTeam::current() == nullptr);
  if (omp_get_max_threads() >= 2 && size == 2) {
    CHECK(StepTeam::teams_started() == started + 1);
    CHECK(wrong[0] + wrong[1] == 0);
    CHECK(calls[0] == 1);
    CHECK(calls[1] == 1);
    CHECK(sum == 20000LL * 19999 + 20000LL);  // Σ round over both threads + Σ 1 for thread 1
  }
  // One thread: the body runs alone, no team.
  StepTeam::run(1, [&] { CHECK(StepTeam::current() == nullptr); });
  // An exception leaves the body, the team ends, run() rethrows it; the next team works.
  CHECK_THROWS_AS(StepTeam::run(2, [] { throw std::runtime_error("step failed"); }), std::runtime_error);
  CHECK(StepTeam::current() == nullptr);
  int after = 0;
  StepTeam::run(2, [&] {
    if (StepTeam* team = StepTeam::current()) team->split([&](int t, int) { if (t == 0) after = 1; });
    else after = 1;
  });
  CHECK(after == 1);
}

TEST_CASE("StepTeam: a team of 5 threads waits for every worker's own done flag", "[parallel]") {
  // More threads than this host's cores: workers yield while they wait. A split that returned
  // before one worker finished would leave its slot at the previous round's value.
  constexpr int kThreads = 5, kRounds = 2000;
  std::vector<long long> slot(kThreads, -1);
  int size = 0, stale = 0;
  StepTeam::run(kThreads, [&] {
    StepTeam* team = StepTeam::current();
    if (team == nullptr) return;  // OpenMP gave one thread
    size = team->size();
    for (int round = 0; round < kRounds; ++round) {
      team->split([&](int t, int) {
        // A different worker finishes last in each round (a wait for one worker's flag only
        // would miss the others).
        if (t != 0) for (volatile int spin = 0; spin < 200 * ((t + round) % size); ++spin) {}
        slot[size_t(t)] = round;
      });
      int fresh = 0;
      for (int t = 0; t < size; ++t) fresh += slot[size_t(t)] == round;
      stale += fresh != size;
    }
  });
  if (size > 1) {
    CHECK(stale == 0);
    CHECK(size <= kThreads);  // run() asks OpenMP for kThreads, never more
  }
}

TEST_CASE("A batch-1 decoding step on a step team gives one thread's bits", "[parallel][cache]") {
  // The output projection (128·2048) and the feed-forward products (128·2048) reach the split
  // threshold (262,144 multiply-adds), so at batch 1 on two threads decode_step holds a team.
  Transformer model(test::tiny_config({40, 2048, 128, 4, 2048, 1, 2, 64}, "pre", true));
  model.init_parameters(3);
  const std::vector<int32_t> src = {5, 6, 7, 8, 9, 10, 11};
  const std::vector<int32_t> tgt = {1, 12, 900, 14, 1500, 16, 17, 2000};
  const Batch b = test::batch_of({Example{src, tgt}});
  const int threads_before = omp_get_max_threads();
  for (ComputeType type : {ComputeType::kFloat32, ComputeType::kBfloat16, ComputeType::kInt8}) {
    model.set_compute_type(type);
    std::vector<Mat> per_threads[2];
    for (int threads : {1, 2}) {
      omp_set_num_threads(threads);
      ForwardCache cache;
      model.encode(b.src, b.src_rows, DropoutContext{}, cache);  // the memory
      DecoderState st = model.begin_decoding(cache.memory, b.src_rows, int(tgt.size()));
      const uint64_t started = StepTeam::teams_started();
      for (int32_t token : tgt) {
        Mat step_logits;
        model.decode_step({token}, st, step_logits);
        per_threads[threads - 1].push_back(step_logits);
      }
      if (threads == 2) CHECK(StepTeam::teams_started() == started + tgt.size());  // one team per step
    }
    INFO("compute type " << compute_type_name(type));
    for (size_t t = 0; t < tgt.size(); ++t) {
      // bfloat16 and int8 split whole output columns of kernels that sum each column alike at
      // any column range: the same bits. float32's Eigen products of a column block may sum in
      // another order than the whole product's (the encoder's too): within rounding.
      if (type == ComputeType::kFloat32) CHECK(test::rel_diff(per_threads[0][t], per_threads[1][t]) < 1e-5);
      else CHECK(per_threads[0][t] == per_threads[1][t]);
    }
  }
  omp_set_num_threads(threads_before);
}
