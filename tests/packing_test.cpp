// Issue #15's two speed mechanisms, checked for correctness: core/gemm.h (OpenBLAS from
// kGemmBlasMinRows output rows, Eigen below) against Eigen's plain products for every transpose
// case, strided blocks, β and empty sums; and packed batches (nn/batch.h Packing: no padding
// rows) against the padded layout in the attention kernel and in make_batch.
#include <catch2/catch.hpp>
#include <omp.h>

#include <cmath>
#include <limits>
#include <random>

#include "anuvad/core/error.h"
#include "anuvad/core/gemm.h"
#include "anuvad/core/gemm_stats.h"
#include "anuvad/core/parallel.h"
#include "anuvad/nn/attention.h"
#include "anuvad/nn/batch.h"
#include "anuvad/nn/layers.h"
#include "support/gradcheck.h"

using namespace anuvad;
using anuvad::test::random_mat;
using anuvad::test::rel_diff;

TEST_CASE("gemm equals Eigen's product for every transpose case, below and above the BLAS threshold", "[gemm]") {
  const Index k = 37, n = 29;
  for (const Index m : {Index(1), Index(2), kGemmBlasMinRows - 1, kGemmBlasMinRows, Index(100)}) {
    for (const bool ta : {false, true})
      for (const bool tb : {false, true}) {
        INFO("m " << m << ", trans_a " << ta << ", trans_b " << tb);
        const Mat a = ta ? random_mat(k, m, 1) : random_mat(m, k, 1);
        const Mat b = tb ? random_mat(n, k, 2) : random_mat(k, n, 2);
        const Mat op_a = ta ? Mat(a.transpose()) : a, op_b = tb ? Mat(b.transpose()) : b;
        const Mat c0 = random_mat(m, n, 3);
        Mat c = c0;
        gemm(a, ta, b, tb, Scalar(0.5), Scalar(2), c);  // C = 0.5·AB + 2·C
        CHECK(rel_diff(c, Mat(Scalar(0.5) * op_a * op_b + Scalar(2) * c0)) < 1e-5);
        c.setConstant(std::numeric_limits<Scalar>::quiet_NaN());
        gemm(a, ta, b, tb, Scalar(1), Scalar(0), c);  // β = 0 overwrites: NaN never propagates
        CHECK(c.allFinite());
        CHECK(rel_diff(c, Mat(op_a * op_b)) < 1e-5);
      }
  }
}

TEST_CASE("gemm below the BLAS threshold splits the columns across threads correctly", "[gemm]") {
  // n·k·m above kGemmColumnSplitMinMultiplyAdds, n not a multiple of the 16-column blocks, C a
  // block of a larger matrix: every transpose case equals Eigen's product, nothing is written
  // outside the block, and it does so with 1, 2 and 3 threads.
  const Index k = 263, n = 1003;
  REQUIRE(double(n) * double(k) >= kGemmColumnSplitMinMultiplyAdds);
  const int saved = omp_get_max_threads();
  for (const int threads : {1, 2, 3})
    for (const Index m : {Index(1), Index(4), kGemmBlasMinRows - 1})
      for (const bool ta : {false, true})
        for (const bool tb : {false, true}) {
          INFO(threads << " threads, m " << m << ", trans_a " << ta << ", trans_b " << tb);
          omp_set_num_threads(threads);
          const Mat a = ta ? random_mat(k, m, 1) : random_mat(m, k, 1);
          const Mat b = tb ? random_mat(n, k, 2) : random_mat(k, n, 2);
          const Mat op_a = ta ? Mat(a.transpose()) : a, op_b = tb ? Mat(b.transpose()) : b;
          Mat big = random_mat(m + 2, n + 5, 3);
          const Mat before = big;
          gemm(a, ta, b, tb, Scalar(0.5), Scalar(2), big.block(1, 2, m, n));
          Mat expected = before;
          expected.block(1, 2, m, n) = Scalar(0.5) * op_a * op_b + Scalar(2) * before.block(1, 2, m, n);
          CHECK(rel_diff(big, expected) < 1e-5);
          CHECK(big.row(0) == before.row(0));
          CHECK(big.col(n + 2) == before.col(n + 2));
        }
  omp_set_num_threads(saved);
}

TEST_CASE("Element-wise passes split across the threads give the bits of one thread", "[parallel]") {
  // 1,500 rows × 50 (75,000 elements, above kParallelMinElements; 50 columns: a partial
  // 16-column line): layer norm forward and backward (γ, β gradients), a post-norm residual
  // sublayer and its backward, and column_sums give the same bits on 1, 2 and 3 threads, and
  // column_sums equals a double sum.
  const Index n = 1500, d = 50;
  REQUIRE(double(n) * double(d) >= kParallelMinElements);
  const Mat x = random_mat(n, d, 7), dy = random_mat(n, d, 8);
  const auto run = [&](int threads) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    ParamRegistry reg;
    LayerNorm ln(reg, "ln", d, Scalar(1e-5));
    ln.gamma.value = random_mat(1, d, 9);
    ln.beta.value = random_mat(1, d, 10);
    Mat y, dx, y2, dx2;
    LayerNormCache cache;
    ln.forward(x, y, cache);
    ln.backward(dy, cache, dx);
    ResidualCache rc;
    const SublayerForward twice = [](const Mat& in, Mat& out) { out = Scalar(2) * in; };
    const SublayerBackward twice_back = [](const Mat& dout, Mat& din) { din = Scalar(2) * dout; };
    residual_forward(x, ln, /*pre_norm=*/false, Scalar(0), DropoutContext(), twice, rc, y2);
    residual_backward(dy, ln, /*pre_norm=*/false, twice_back, rc, dx2);
    Mat sums(1, d);
    column_sums(x, sums, /*accumulate=*/false);
    omp_set_num_threads(saved);
    return std::vector<Mat>{y, dx, ln.gamma.grad, ln.beta.grad, y2, dx2, sums};
  };
  const std::vector<Mat> one = run(1);
  for (const int threads : {2, 3}) {
    const std::vector<Mat> other = run(threads);
    for (size_t i = 0; i < one.size(); ++i) {
      INFO(threads << " threads, output " << i);
      CHECK(one[i] == other[i]);
    }
  }
  for (Index c = 0; c < d; ++c) {
    double sum = 0;
    for (Index r = 0; r < n; ++r) sum += double(x(r, c));
    CHECK(std::abs(double(one[6](0, c)) - sum) < 1e-3);
  }
}

TEST_CASE("gemm_stats counts calls, FLOPs and the idle time of split products", "[gemm]") {
  const Index m = 256, n = 192, k = 128;  // m·n·k = 6.3M multiply-adds: split across threads
  REQUIRE(double(m) * n * k >= kGemmSplitMinMultiplyAdds);
  const Mat a = random_mat(m, k, 1), b = random_mat(k, n, 2);
  Mat c(m, n);
  const int threads = omp_get_max_threads();
  start_gemm_stats();
  gemm(a, false, b, false, Scalar(1), Scalar(0), c);
  GemmStats s = gemm_stats();
  CHECK(s.calls == 1);
  CHECK(s.flops == 2.0 * double(m) * n * k);
  CHECK(s.seconds > 0);
  // wall time minus the threads' mean time inside their block: within [0, the call's time]
  CHECK(s.split_idle_seconds >= 0);
  CHECK(s.split_idle_seconds <= s.seconds);
  if (threads < 2) CHECK(s.split_idle_seconds == 0);
  // One thread: no split, so no idle time is added; the call and its FLOPs still count.
  omp_set_num_threads(1);
  gemm(a, false, b, false, Scalar(1), Scalar(0), c);
  omp_set_num_threads(threads);
  const GemmStats one = gemm_stats();
  CHECK(one.calls == 2);
  CHECK(one.split_idle_seconds == s.split_idle_seconds);
  start_gemm_stats();  // starts from zero again
  s = gemm_stats();
  CHECK((s.calls == 0 && s.seconds == 0 && s.flops == 0 && s.split_idle_seconds == 0));
}

TEST_CASE("gemm reads and writes blocks of larger matrices, and checks shapes", "[gemm]") {
  const Mat big_a = random_mat(60, 50, 4), big_b = random_mat(40, 50, 5);
  Mat big_c = random_mat(70, 45, 6);
  const Mat before = big_c;
  // C[5:45, 3:33] += A[10:50, 7:27] · B[2:32, 7:27]ᵀ: row strides of the parents, not the blocks.
  gemm(big_a.block(10, 7, 40, 20), false, big_b.block(2, 7, 30, 20), true, Scalar(1), Scalar(1),
       big_c.block(5, 3, 40, 30));
  Mat expected = before;
  expected.block(5, 3, 40, 30) += big_a.block(10, 7, 40, 20) * big_b.block(2, 7, 30, 20).transpose();
  CHECK(rel_diff(big_c, expected) < 1e-5);
  CHECK(big_c.topRows(5) == before.topRows(5));  // nothing written outside the block
  Mat c(3, 4);
  CHECK_THROWS_AS(gemm(random_mat(3, 5, 1), false, random_mat(6, 4, 2), false, Scalar(1), Scalar(0), c), ShapeError);
  // An empty inner dimension is an empty sum: C = β·C.
  Mat e = Mat::Ones(20, 4);
  gemm(Mat(20, 0), false, Mat(0, 4), false, Scalar(1), Scalar(3), e);
  CHECK(e == Mat::Constant(20, 4, Scalar(3)));
  CHECK(!gemm_backend().empty());
}

TEST_CASE("Packing lays sequences end to end and make_batch packs without padding", "[packing]") {
  const Packing p = Packing::of({3, 0, 5});
  CHECK(p.offsets == std::vector<int>{0, 3, 3, 8});
  CHECK(p.rows() == 8);
  CHECK(p.max_length == 5);
  CHECK(p.batch_size() == 3);
  CHECK_THROWS_AS(Packing::of({2, -1}), ShapeError);
  const Example e0{{10, 11}, {20}}, e1{{12, 13, 14, 15}, {21, 22, 23}};
  const Batch b = make_batch({&e0, &e1});
  CHECK(b.src == TokenIds{10, 11, kEosId, 12, 13, 14, 15, kEosId});
  CHECK(b.tgt_in == TokenIds{kBosId, 20, kBosId, 21, 22, 23});
  CHECK(b.tgt_out == TokenIds{20, kEosId, 21, 22, 23, kEosId});
  CHECK(b.src_rows.offsets == std::vector<int>{0, 3, 8});
  CHECK(b.tgt_rows.offsets == std::vector<int>{0, 2, 6});
  CHECK(b.src_len == 5);
  CHECK(b.tgt_len == 4);
  CHECK(b.n_tgt_tokens() == 6);
  CHECK(b.padded_tokens() == 2 * (5 + 4));  // 18 positions padded, of which 14 are real
}

TEST_CASE("Packed attention equals the padded kernel on real rows and is exactly zero elsewhere", "[packing][mask]") {
  const int n_heads = 2, d_model = 8, batch = 3, T = 5;
  const std::vector<int> lengths = {5, 1, 3};
  const Packing rows = Packing::of(lengths);
  for (const bool causal : {false, true}) {
    INFO("causal " << causal);
    // Padded [B·T, D] inputs; the packed ones are their real rows.
    const Mat q = random_mat(Index(batch) * T, d_model, 7), k = random_mat(Index(batch) * T, d_model, 8),
              v = random_mat(Index(batch) * T, d_model, 9);
    Mat qp(rows.rows(), d_model), kp(rows.rows(), d_model), vp(rows.rows(), d_model);
    for (int b = 0; b < batch; ++b) {
      qp.middleRows(rows.offsets[b], lengths[b]) = q.middleRows(Index(b) * T, lengths[b]);
      kp.middleRows(rows.offsets[b], lengths[b]) = k.middleRows(Index(b) * T, lengths[b]);
      vp.middleRows(rows.offsets[b], lengths[b]) = v.middleRows(Index(b) * T, lengths[b]);
    }
    const AttentionMask mask{&lengths, causal, 0};
    Mat probs, ctx, probs_p, ctx_p;
    scaled_dot_product_attention(q, k, v, AttentionShape{batch, T, T, n_heads, T}, mask, Mat(), probs, ctx);
    const AttentionShape packed{batch, T, T, n_heads, 0, nullptr, 0, &rows, &rows};
    scaled_dot_product_attention(qp, kp, vp, packed, mask, Mat(), probs_p, ctx_p);
    REQUIRE(ctx_p.rows() == rows.rows());
    for (int b = 0; b < batch; ++b) {
      CHECK(rel_diff(ctx_p.middleRows(rows.offsets[b], lengths[b]), ctx.middleRows(Index(b) * T, lengths[b])) < 1e-6);
      for (int h = 0; h < n_heads; ++h) {
        const Index r0 = (Index(b) * n_heads + h) * T;
        CHECK(rel_diff(probs_p.block(r0, 0, lengths[b], T), probs.block(r0, 0, lengths[b], T)) < 1e-6);
        // Rows of padding queries are never computed: exactly zero.
        CHECK(probs_p.block(r0 + lengths[b], 0, T - lengths[b], T).isZero(0));
      }
    }
  }
}
