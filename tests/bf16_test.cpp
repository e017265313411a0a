// bfloat16 decoding weights (core/bf16.h, Transformer::set_compute_type, issue #15): rounding
// to bfloat16, the small-row product on every code path compiled into this build against a
// float32 product of the same rounded weights, and decoding the two reference fixture models
// (tests/data/reference/, pre-norm tied and post-norm untied, 20 training steps) in bfloat16
// against float32 on the bundled dev sentences.
#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "anuvad/core/bf16.h"
#include "anuvad/core/error.h"
#include "anuvad/decode/decode.h"
#include "anuvad/io/model_file.h"
#include "anuvad/nn/layers.h"
#include "anuvad/text/corpus.h"
#include "support/precision_drift.h"

using namespace anuvad;

namespace {

uint16_t bf16_of_bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return float_to_bf16(f);
}

Mat random_mat(Index rows, Index cols, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Mat m(rows, cols);
  for (Index i = 0; i < m.size(); ++i) m.data()[i] = normal(rng);
  return m;
}

}  // namespace

TEST_CASE("float_to_bf16 rounds to nearest even and keeps Inf and NaN", "[bf16]") {
  CHECK(bf16_of_bits(0x3f800000u) == 0x3f80);  // 1.0 exact
  CHECK(bf16_of_bits(0x3f807fffu) == 0x3f80);  // below half: down
  CHECK(bf16_of_bits(0x3f808000u) == 0x3f80);  // half, even lsb: stays
  CHECK(bf16_of_bits(0x3f818000u) == 0x3f82);  // half, odd lsb: up to even
  CHECK(bf16_of_bits(0x3f808001u) == 0x3f81);  // above half: up
  CHECK(bf16_of_bits(0xc0000000u) == 0xc000);  // -2.0
  CHECK(bf16_of_bits(0xbf818000u) == 0xbf82);  // sign kept while rounding
  CHECK(bf16_of_bits(0x3f7fffffu) == 0x3f80);  // carry into the exponent
  CHECK(bf16_of_bits(0x00018000u) == 0x0002);  // subnormal half, odd lsb: up
  CHECK(bf16_of_bits(0x00008000u) == 0x0000);  // subnormal half, even: to zero
  CHECK(bf16_of_bits(0x7f800000u) == 0x7f80);  // +Inf
  CHECK(bf16_of_bits(0xff800000u) == 0xff80);  // -Inf
  CHECK(bf16_of_bits(0x7f7fffffu) == 0x7f80);  // FLT_MAX rounds to +Inf
  CHECK(bf16_of_bits(0x7fc00000u) == 0x7fc0);  // quiet NaN
  CHECK(bf16_of_bits(0x7f800001u) == 0x7fc0);  // signalling NaN whose payload is all dropped: still NaN
  CHECK(bf16_of_bits(0xffffffffu) == 0xffff);  // negative NaN keeps its sign
  CHECK(std::isnan(bf16_to_float(bf16_of_bits(0x7f800001u))));
  CHECK(bf16_to_float(0x3f82) == 1.015625f);
  // Every bfloat16 value survives a round trip.
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const float f = bf16_to_float(uint16_t(h));
    if (!std::isnan(f)) REQUIRE(float_to_bf16(f) == h);
  }
}

TEST_CASE("bf16_affine equals a float32 product of the rounded weights on every compiled path", "[bf16]") {
  std::mt19937_64 rng(7);
  for (const Bf16Kernel kernel : bf16_kernels_compiled()) {
    // oneDNN gets 1 and 3 rows as they are, 17 as 20 and 70 as 80 (zero rows added:
    // bf16_onednn.cpp, padded_rows)
    for (const Index m : {1, 3, 17, 70}) {
      for (const auto& [n, k] : std::vector<std::pair<Index, Index>>{{37, 71}, {5, 200}, {64, 96}, {9, 1}}) {
        const Mat x = random_mat(m, k, rng), bias = random_mat(1, n, rng);
        const Bf16Matrix w = to_bf16(random_mat(n, k, rng));
        const Mat wf = from_bf16(w);
        // The dot-product path multiplies the activations rounded to bfloat16 (exact products:
        // 8 × 8 significant bits fit a float32); the others the activations as they are.
        const Mat xr = kernel == Bf16Kernel::kAvx512Bf16 || kernel == Bf16Kernel::kOnednn ? from_bf16(to_bf16(x)) : x;
        // Reference in double; float32 summation of k terms in any order is within
        // k·2^-24·Σ|x·w| of it (Higham's bound, with the tree sums of the vector paths).
        const Eigen::MatrixXd ref = (xr.cast<double>() * wf.cast<double>().transpose()).rowwise() +
                                    bias.cast<double>().row(0);
        const Eigen::MatrixXd mag = xr.cast<double>().cwiseAbs() * wf.cast<double>().cwiseAbs().transpose();
        Mat y(m, n);
        bf16_affine(x, w, bias, y, kernel);
        INFO("path " << bf16_kernel_name(kernel) << ", m " << m << ", n " << n << ", k " << k);
        const auto near_ref = [&](const Mat& got, Index r, Index got_row) {
          for (Index c = 0; c < n; ++c)
            if (std::abs(double(got(got_row, c)) - ref(r, c)) >
                double(k + 2) * std::ldexp(1.0, -24) * (mag(r, c) + std::abs(bias(0, c))))
              return false;
          return true;
        };
        for (Index r = 0; r < m; ++r) REQUIRE(near_ref(y, r, r));
        // Without a bias, and each row alone: the same numbers bit for bit (no dependence on m)
        // on anuvad's own paths and oneDNN; OpenBLAS (kBlas) may pick another kernel for one
        // row than for 17, so there each row alone is held to the bound above.
        Mat y0(m, n), row(1, n);
        bf16_affine(x, w, Mat(), y0, kernel);
        for (Index r = 0; r < m; ++r) {
          bf16_affine(x.row(r), w, bias, row, kernel);
          if (kernel == Bf16Kernel::kBlas) REQUIRE(near_ref(row, r, 0));
          else REQUIRE(row == y.row(r));
        }
        REQUIRE((y0.rowwise() + bias.row(0) - y).cwiseAbs().maxCoeff() <= 1e-5f * (1.0f + y.cwiseAbs().maxCoeff()));
      }
    }
  }
}

TEST_CASE("bf16_affine: the AVX2 GEMM path sums as the scalar path, bit for bit", "[bf16]") {
  const auto compiled = bf16_kernels_compiled();
  if (std::find(compiled.begin(), compiled.end(), Bf16Kernel::kAvx2Gemm) == compiled.end()) {
    WARN("no AVX2 GEMM path in this build: nothing to compare");
    return;
  }
  std::mt19937_64 rng(13);
  // Tiles of 6 rows and every shorter tail (m mod 6 = 5, 4, 5, 2, 3, 1 below); panels of 16
  // columns and a partial one; k in blocks of 8 and a tail; more columns than one thread's split.
  // With a bias and without one (the tiles write bias + sum, or the sum, into y without reading
  // it: y starts as NaN here, which any read would carry into the result).
  for (const auto& [m, n, k] : std::vector<std::array<Index, 3>>{
           {23, 53, 77}, {64, 300, 512}, {5, 16, 8}, {32, 40, 24}, {3, 17, 9}, {1, 33, 16}})
    for (const bool with_bias : {true, false}) {
      const Mat x = random_mat(m, k, rng), bias = with_bias ? random_mat(1, n, rng) : Mat();
      const Bf16Matrix w = to_bf16(random_mat(n, k, rng));
      Mat scalar(m, n), gemm = Mat::Constant(m, n, std::numeric_limits<Scalar>::quiet_NaN());
      bf16_affine(x, w, bias, scalar, Bf16Kernel::kScalar);
      bf16_affine(x, w, bias, gemm, Bf16Kernel::kAvx2Gemm);
      INFO("m " << m << ", n " << n << ", k " << k << ", bias " << with_bias);
      CHECK(gemm == scalar);
    }
}

TEST_CASE("bf16_affine: more rows than one pass takes give each row its own result", "[bf16]") {
  std::mt19937_64 rng(9);
  const Index m = 2 * kBf16MaxRowsPerCall + 3;  // two full passes and a short one
  // k = 160: a full pass rounds 256 · 160 ≥ kParallelMinElements activations, so the oneDNN
  // path splits that rounding across the threads; the single rows below round on one.
  const Mat x = random_mat(m, 160, rng), bias = random_mat(1, 21, rng);
  const Bf16Matrix w = to_bf16(random_mat(21, 160, rng));
  for (const Bf16Kernel kernel : bf16_kernels_compiled()) {
    Mat y(m, 21), row(1, 21);
    bf16_affine(x, w, bias, y, kernel);
    for (const Index r : {Index(0), kBf16MaxRowsPerCall - 1, kBf16MaxRowsPerCall, m - 1}) {
      bf16_affine(x.row(r), w, bias, row, kernel);
      INFO("path " << bf16_kernel_name(kernel) << ", row " << r);
      // kBlas: OpenBLAS may sum one row in another order than a block of rows (first test case).
      if (kernel == Bf16Kernel::kBlas) REQUIRE((row - y.row(r)).cwiseAbs().maxCoeff() <= 1e-5f * (1.0f + y.row(r).cwiseAbs().maxCoeff()));
      else REQUIRE(row == y.row(r));
    }
  }
}

TEST_CASE("bf16_affine auto: oneDNN from kOnednnMinRows rows where available, else the AVX2 GEMM path or OpenBLAS from kBf16BlasMinRows, the widest own path below", "[bf16]") {
  std::mt19937_64 rng(10);
  const Bf16Matrix w = to_bf16(random_mat(70, 96, rng));
  const Mat bias = random_mat(1, 70, rng);
  // The widest own path: compiled, not a batched path, and no own path listed after it (checked
  // before the rest of the case relies on it).
  const Bf16Kernel own = bf16_widest_own_kernel();
  const std::vector<Bf16Kernel> compiled = bf16_kernels_compiled();
  const auto widest = std::find(compiled.begin(), compiled.end(), own);
  REQUIRE(widest != compiled.end());
  const auto batched_path_of = [](Bf16Kernel k) {
    return k == Bf16Kernel::kBlas || k == Bf16Kernel::kOnednn || k == Bf16Kernel::kAvx2Gemm;
  };
  REQUIRE_FALSE(batched_path_of(own));
  REQUIRE(std::none_of(widest + 1, compiled.end(), [&](Bf16Kernel k) { return !batched_path_of(k); }));
  // Without oneDNN, products of many rows go to the AVX2 GEMM path where the widest own path is
  // AVX2, to OpenBLAS on widened weights unless the own path multiplies bfloat16 itself.
  const bool batched = !bf16_onednn_available() && own != Bf16Kernel::kAvx512Bf16;
  const Bf16Kernel batched_path = own == Bf16Kernel::kAvx2 ? Bf16Kernel::kAvx2Gemm : Bf16Kernel::kBlas;
  CHECK(bf16_kernel_name(Bf16Kernel::kAuto) ==
        (bf16_onednn_available() ? "onednn+"
         : batched               ? bf16_kernel_name(batched_path) + "+"
                                 : std::string()) + bf16_kernel_name(own));
  CHECK((w.onednn != nullptr) == bf16_onednn_available());
  for (const Index m : {kOnednnMinRows - 1, kOnednnMinRows, kBf16BlasMinRows - 1, kBf16BlasMinRows, Index(37)}) {
    const Mat x = random_mat(m, 96, rng);
    Mat y(m, 70), expected(m, 70);
    bf16_affine(x, w, bias, y);
    const Bf16Kernel path = bf16_onednn_available() && m >= kOnednnMinRows ? Bf16Kernel::kOnednn
                            : batched && m >= kBf16BlasMinRows             ? batched_path
                                                                           : own;
    bf16_affine(x, w, bias, expected, path);
    INFO("m " << m << ": " << bf16_kernel_name(path));
    CHECK(y == expected);
  }
}

TEST_CASE("bf16_affine: threads split columns without changing a bit; sizes are checked", "[bf16]") {
  std::mt19937_64 rng(8);
  const Mat x = random_mat(3, 513, rng), bias = random_mat(1, 203, rng);
  const Bf16Matrix w = to_bf16(random_mat(203, 513, rng));
  REQUIRE(3.0 * 203 * 513 >= kBf16SplitMinMultiplyAdds);
  Mat one(3, 203), two(3, 203), inside(3, 203);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  bf16_affine(x, w, bias, one);
  omp_set_num_threads(2);
  bf16_affine(x, w, bias, two);  // 3·203·513 multiply-adds: split across two threads
#pragma omp parallel num_threads(2)
  {
#pragma omp single
    bf16_affine(x, w, bias, inside);  // inside a parallel region: the calling thread alone
  }
  omp_set_num_threads(threads);
  CHECK(one == two);
  CHECK(one == inside);
  // One row (on the AVX-512 BF16 path a matrix-vector kernel of its own, 8 columns at a time,
  // the rest by 4 and by 1), on every own path: split across two threads at column 308 of 619
  // (1·619·513 ≥ kBf16SplitMinMultiplyAdds; 308 = 38·8 + 4 and 311 = 38·8 + 4 + 3, so each
  // thread's range has a 4-column rest and the second's starts off a multiple of 8), the same
  // bits as on one thread and as row 0 of a 3-row product (the 4-row tile's code).
  const Mat x3 = random_mat(3, 513, rng), bias_wide = random_mat(1, 619, rng);
  const Bf16Matrix w_wide = to_bf16(random_mat(619, 513, rng));
  REQUIRE(619.0 * 513 >= kBf16SplitMinMultiplyAdds);
  for (const Bf16Kernel kernel : bf16_kernels_compiled()) {
    if (kernel == Bf16Kernel::kBlas || kernel == Bf16Kernel::kOnednn) continue;  // not ours
    Mat rows3(3, 619), row_one(1, 619), row_two(1, 619);
    omp_set_num_threads(1);
    bf16_affine(x3, w_wide, bias_wide, rows3, kernel);
    bf16_affine(x3.row(0), w_wide, bias_wide, row_one, kernel);
    omp_set_num_threads(2);
    bf16_affine(x3.row(0), w_wide, bias_wide, row_two, kernel);
    omp_set_num_threads(threads);
    INFO("path " << bf16_kernel_name(kernel));
    CHECK(row_one == rows3.row(0));
    CHECK(row_two == rows3.row(0));
  }
  Mat wrong(2, 202);
  CHECK_THROWS_AS(bf16_affine(x, w, bias, wrong), ShapeError);
  CHECK_THROWS_AS(bf16_affine(x.leftCols(512), w, bias, one), ShapeError);
  CHECK_THROWS_AS(parse_compute_type("float16"), ConfigError);
  CHECK(parse_compute_type("bfloat16") == ComputeType::kBfloat16);
}

using anuvad::test::dev_pairs;
using anuvad::test::fixture_model;

// Measured on the two fixture models over the 184 pairs of data/dev.tsv and data/test.tsv that
// fit their 32 positions: the largest change of a sentence's forced-decoding log-probability was
// 0.027 nats (pre) and 0.024 nats (post), relative 0.038 % and 0.025 %, with the decoder's
// weights in bfloat16 and float32 activations; with every product weight in bfloat16 and the
// AVX-512 BF16 kernel (activations rounded too) 0.036 and 0.043 nats, relative 0.049 % and
// 0.044 %, identical outputs 180 and 135 of 184; greedy outputs were
// identical for 181 (pre) and 126 (post) of the 184 sentences: these models are trained for 20
// steps only, so their next-token distributions are flat and near-ties (the post-norm one's
// especially) flip under a 2^-9 relative change of the weights. The bounds leave a margin: 0.2 %
// per sentence, 90 % (pre) and 60 % (post) identical outputs.
TEST_CASE("Decoding in bfloat16 moves scores a little and outputs hardly at all", "[bf16][decode]") {
  for (const std::string which : {"pre", "post"}) {
    const TranslationModel f32 = load_model(fixture_model(which));
    TranslationModel b16 = load_model(fixture_model(which));
    b16.transformer->set_compute_type(ComputeType::kBfloat16);
    const test::PrecisionDrift d = test::precision_drift(f32, b16);
    INFO(which << ": largest score change " << d.max_abs << " nats (relative " << d.max_rel
               << "), identical greedy outputs " << d.same_greedy << "/" << d.sentences);
    CHECK(d.max_abs > 0);  // bfloat16 really ran: float32 weights would give the same scores
    CHECK(d.max_rel <= 0.002);
    CHECK(double(d.same_greedy) >= (which == "pre" ? 0.9 : 0.6) * double(d.sentences));
  }
}

TEST_CASE("set_compute_type holds every product weight in bfloat16 only and refuses saving", "[bf16]") {
  TranslationModel m = load_model(fixture_model("pre"));
  Transformer& t = *m.transformer;
  const Param* q = t.params().find("decoder.layers.0.self_attn.q_proj.weight");
  const Param* emb = t.params().find("decoder.embed_tokens.weight");  // tied output projection
  const Param* cross_k = t.params().find("decoder.layers.0.cross_attn.k_proj.weight");
  const Param* enc = t.params().find("encoder.layers.0.ffn.linear1.weight");
  const Param* src_emb = t.params().find("encoder.embed_tokens.weight");
  const Param* norm = t.params().find("encoder.layers.0.ffn_norm.weight");
  const Param* bias = t.params().find("encoder.layers.0.ffn.linear1.bias");
  REQUIRE((q && emb && cross_k && enc && src_emb && norm && bias));
  const Bf16Matrix rounded = to_bf16(q->value), enc_rounded = to_bf16(enc->value);
  t.set_compute_type(ComputeType::kBfloat16);
  CHECK(t.compute_type() == ComputeType::kBfloat16);
  for (const Param* p : {q, emb, cross_k, enc}) {
    CHECK(p->value.size() == 0);  // the float32 copy is freed
    CHECK(p->bf16.rows == p->shape[0]);
    CHECK(p->bf16.cols == p->shape[1]);
  }
  CHECK(q->bf16.data == rounded.data);
  // Read once per sentence: where oneDNN multiplies them, held only in its packed layout.
  for (const Param* p : {cross_k, enc}) CHECK(p->bf16.data.empty() == bf16_onednn_available());
  CHECK(from_bf16(enc->bf16) == from_bf16(enc_rounded));  // read back from oneDNN's copy
  // Looked up or added, not multiplied: they stay float32.
  for (const Param* p : {src_emb, norm, bias}) CHECK((p->bf16.empty() && p->value.size() > 0));
  CHECK_THROWS_AS(model_to_safetensors(t, *m.src_tokenizer, *m.tgt_tokenizer), ConfigError);
  t.set_compute_type(ComputeType::kFloat32);
  CHECK(q->bf16.empty());
  CHECK(q->value == from_bf16(rounded));
  CHECK(enc->value == from_bf16(enc_rounded));
}

TEST_CASE("auto is bfloat16 from kBf16AutoMinWeightBytes on a vector path, float32 otherwise", "[bf16]") {
  CHECK(parse_compute_type("auto") == ComputeType::kAuto);
  CHECK(compute_type_name(ComputeType::kAuto) == "auto");
  const std::string name = bf16_kernel_name(Bf16Kernel::kAuto);  // "onednn+avx512bf16", "scalar", ...
  const bool vector_path = name.size() < 6 || name.compare(name.size() - 6, 6, "scalar") != 0;
  CHECK(auto_compute_type(kBf16AutoMinWeightBytes) ==
        (vector_path ? ComputeType::kBfloat16 : ComputeType::kFloat32));
  CHECK(auto_compute_type(kBf16AutoMinWeightBytes - 1) == ComputeType::kFloat32);
  // The fixture model is far below the threshold: auto leaves it in float32, untouched.
  TranslationModel m = load_model(fixture_model("pre"));
  Transformer& t = *m.transformer;
  const int64_t bytes = t.product_weight_bytes();
  CHECK(bytes > 0);
  CHECK(bytes < kBf16AutoMinWeightBytes);
  const Mat before = t.params().find("decoder.layers.0.self_attn.q_proj.weight")->value;
  t.set_compute_type(ComputeType::kAuto);
  CHECK(t.compute_type() == ComputeType::kFloat32);
  CHECK(t.params().find("decoder.layers.0.self_attn.q_proj.weight")->value == before);
  // product_weight_bytes counts the same matrices whichever precision holds them.
  t.set_compute_type(ComputeType::kBfloat16);
  CHECK(t.product_weight_bytes() == bytes);
}

TEST_CASE("Backward passes refuse bfloat16 weights instead of writing past an empty gradient", "[bf16]") {
  std::mt19937_64 rng(5);
  ParamRegistry reg;
  Linear lin(reg, "lin", 8, 4);
  Embedding emb(reg, "emb", 10, 8, 16);
  for (Param* p : {&lin.weight, &emb.weight}) {
    p->value = random_mat(p->value.rows(), p->value.cols(), rng);
    p->bf16 = to_bf16(p->value);
    p->value = Mat();  // as Transformer::set_compute_type leaves them
  }
  const Mat x = random_mat(3, 8, rng), dy = random_mat(3, 4, rng);
  Mat y, dx;
  lin.forward(x, y);  // forward runs on the bfloat16 weights
  CHECK(y.rows() == 3);
  CHECK(y.cols() == 4);
  CHECK_THROWS_AS(lin.backward(dy, x, dx, false), ShapeError);
  const TokenIds ids{1, 2, 3};
  CHECK_THROWS_AS(emb.backward(random_mat(3, 8, rng), ids), ShapeError);
}

TEST_CASE("Decoding on oneDNN gives with two threads what it gives with one", "[bf16][decode]") {
  if (!bf16_onednn_available()) {
    WARN("oneDNN is not available in this build or on this CPU: nothing to check");
    return;
  }
  // Sentences decoded in parallel call oneDNN from two threads at once; Debian's oneDNN shares
  // one library scratchpad between primitives, so each call brings its own (bf16_onednn.cpp).
  // With the shared one, 36-177 of these 184 outputs kept their tokens and scores (measured).
  const int threads = omp_get_max_threads();
  for (const std::string which : {"pre", "post"}) {
    TranslationModel m = load_model(fixture_model(which));
    m.transformer->set_compute_type(ComputeType::kBfloat16);
    std::vector<std::vector<int32_t>> sources;
    for (const Example& e : dev_pairs(m)) sources.push_back(e.src);
    for (const Bf16Kernel kernel : {Bf16Kernel::kOnednn, Bf16Kernel::kAuto}) {
      set_bf16_auto_kernel(kernel);
      omp_set_num_threads(1);
      const auto one = greedy_decode(*m.transformer, sources, DecodeOptions{});
      omp_set_num_threads(2);
      const auto two = greedy_decode(*m.transformer, sources, DecodeOptions{});
      int same = 0;
      for (size_t i = 0; i < sources.size(); ++i) same += one[i].tokens == two[i].tokens && one[i].score == two[i].score;
      INFO(which << ", " << bf16_kernel_name(kernel) << ": " << same << "/" << sources.size() << " identical");
      CHECK(same == int(sources.size()));
    }
  }
  set_bf16_auto_kernel(Bf16Kernel::kAuto);
  omp_set_num_threads(threads);
}
