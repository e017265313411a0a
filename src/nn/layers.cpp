// Forward and backward passes of the basic layers (see include/anuvad/nn/layers.h).
#include "anuvad/nn/layers.h"

#include <cmath>

#include "anuvad/core/bf16.h"
#include "anuvad/core/error.h"
#include "anuvad/core/gemm.h"
#include "anuvad/core/int8.h"
#include "anuvad/core/parallel.h"

namespace anuvad {

// ---------------------------------------------------------------------------------------------
// Linear

Linear::Linear(ParamRegistry& reg, const std::string& prefix, Index in_features,
               Index out_features)
    : weight(reg.add(prefix + ".weight", {out_features, in_features})),
      bias(reg.add(prefix + ".bias", {out_features})) {}

void Linear::forward(const Eigen::Ref<const Mat>& x, Mat& y) const {
  y.resize(x.rows(), weight.rows());
  forward_into(x, y);
}

void Linear::forward_into(const Eigen::Ref<const Mat>& x, Eigen::Ref<Mat> y) const {
  ANUVAD_CHECK_SHAPE(x.cols() == weight.cols(),
                     weight.name + ": input has " + std::to_string(x.cols()) +
                         " features, expected " + std::to_string(weight.cols()));
  param_affine(x, weight, bias.value, y);  // checks the output block
}

void param_affine(const Eigen::Ref<const Mat>& x, const Param& weight, const Mat& b, Eigen::Ref<Mat> y) {
  if (!weight.bf16.empty()) return bf16_affine(x, weight.bf16, b, y);
  if (!weight.int8.empty()) return int8_affine(x, weight.int8, b, y);
  affine_into(x, weight.value, b, y);
}

void affine_into(const Eigen::Ref<const Mat>& x, const Mat& w, const Mat& b, Eigen::Ref<Mat> y) {
  ANUVAD_CHECK_SHAPE(x.cols() == w.cols() && y.rows() == x.rows() && y.cols() == w.rows() &&
                         b.rows() == 1 && b.cols() == w.rows(),
                     "affine_into: shape mismatch");
  // Start from the bias and accumulate the product: no zero-fill pass, no second bias pass.
  parallel_blocks(y.rows(), double(y.size()), [&](Index r0, Index r1) {
    y.middleRows(r0, r1 - r0).rowwise() = b.row(0);
  });
  gemm(x, false, w, true, Scalar(1), Scalar(1), y);
}

void affine_backward(const Eigen::Ref<const Mat>& dy, const Eigen::Ref<const Mat>& x,
                     const Mat& w, Mat& dw, Mat& db, Mat& dx, bool accumulate) {
  ANUVAD_CHECK_SHAPE(dy.cols() == w.rows() && x.cols() == w.cols() && dy.rows() == x.rows() &&
                         dw.rows() == w.rows() && dw.cols() == w.cols() && db.cols() == w.rows(),
                     "affine_backward: shape mismatch");
  if (accumulate) {
    ANUVAD_CHECK_SHAPE(dx.rows() == dy.rows() && dx.cols() == w.cols(), "affine_backward: dx shape");
  } else {
    dx.resize(dy.rows(), w.cols());
  }
  // forward: y = x·Wᵀ + b  ⇒  dW = dyᵀ·x, db = Σ_rows dy, dx = dy·W.
  gemm(dy, true, x, false, Scalar(1), Scalar(1), dw);
  column_sums(dy, db, /*accumulate=*/true);
  gemm(dy, false, w, false, Scalar(1), accumulate ? Scalar(1) : Scalar(0), dx);
}

void Linear::backward(const Eigen::Ref<const Mat>& dy, const Eigen::Ref<const Mat>& x, Mat& dx,
                      bool accumulate) const {
  ANUVAD_CHECK_SHAPE(weight.is_float(), weight.name + ": backward on bfloat16 or int8 weights");
  affine_backward(dy, x, weight.value, weight.grad_acc(), bias.grad_acc(), dx, accumulate);
}

// ---------------------------------------------------------------------------------------------
// LayerNorm

LayerNorm::LayerNorm(ParamRegistry& reg, const std::string& prefix, Index d_model, Scalar eps)
    : gamma(reg.add(prefix + ".weight", {d_model})),
      beta(reg.add(prefix + ".bias", {d_model})),
      eps_(eps) {
  gamma.value.setOnes();
}

void LayerNorm::forward(const Eigen::Ref<const Mat>& x, Mat& y, LayerNormCache& cache) const {
  const Index n = x.rows(), d = x.cols();
  ANUVAD_CHECK_SHAPE(d == gamma.value.cols(), gamma.name + ": wrong input width");
  cache.x_hat.resize(n, d);
  cache.rstd.resize(n);
  y.resize(n, d);
  parallel_blocks(n, double(n) * double(d), [&](Index r0, Index r1) {
    for (Index r = r0; r < r1; ++r) {
      const Scalar mean = x.row(r).mean();
      const Scalar var = (x.row(r).array() - mean).square().mean();
      const Scalar rstd = Scalar(1) / std::sqrt(var + eps_);
      cache.rstd[r] = rstd;
      cache.x_hat.row(r) = (x.row(r).array() - mean) * rstd;
      y.row(r) = cache.x_hat.row(r).cwiseProduct(gamma.value) + beta.value;
    }
  });
}

void LayerNorm::backward(const Eigen::Ref<const Mat>& dy, const LayerNormCache& cache,
                         Mat& dx) const {
  // forward: y = γ ⊙ x̂ + β, x̂ = (x − μ)·rstd
  // ⇒ dγ = Σ dy ⊙ x̂, dβ = Σ dy, dx = rstd·(dx̂ − mean(dx̂) − x̂ ⊙ mean(dx̂ ⊙ x̂)), dx̂ = dy ⊙ γ
  const Index n = dy.rows(), d = dy.cols();
  column_sums(dy.cwiseProduct(cache.x_hat), gamma.grad_acc(), /*accumulate=*/true);
  column_sums(dy, beta.grad_acc(), /*accumulate=*/true);
  dx.resize(n, d);
  parallel_blocks(n, double(n) * double(d), [&](Index r0, Index r1) {
    for (Index r = r0; r < r1; ++r) {
      const auto dxhat = dy.row(r).cwiseProduct(gamma.value);  // an expression: no allocation
      const Scalar m1 = dxhat.mean();
      const Scalar m2 = dxhat.cwiseProduct(cache.x_hat.row(r)).mean();
      dx.row(r) = cache.rstd[r] * (dxhat.array() - m1 - cache.x_hat.row(r).array() * m2);
    }
  });
}

// ---------------------------------------------------------------------------------------------
// FeedForward

FeedForward::FeedForward(ParamRegistry& reg, const std::string& prefix, Index d_model, Index d_ff)
    : linear1(reg, prefix + ".linear1", d_model, d_ff),
      linear2(reg, prefix + ".linear2", d_ff, d_model) {}

void FeedForward::forward(const Eigen::Ref<const Mat>& x, Scalar ffn_dropout,
                          const DropoutContext& dctx, FeedForwardCache& cache, Mat& y) const {
  linear1.forward(x, cache.hidden);
  make_dropout_mask(cache.hidden.cols(), ffn_dropout, dctx.site(dropout_site::kFfnHidden), cache.drop);
  ANUVAD_CHECK_SHAPE(cache.drop.size() == 0 || cache.drop.rows() == x.rows(),
                     "FeedForward: the dropout rows do not match the input");
  const bool dropped = cache.drop.size() > 0;
  if (dropped) cache.hidden_dropped.resize(cache.hidden.rows(), cache.hidden.cols());
  else cache.hidden_dropped.resize(0, 0);
  // ReLU, then the dropout mask, in one pass over the hidden rows.
  parallel_blocks(cache.hidden.rows(), double(cache.hidden.size()), [&](Index r0, Index r1) {
    auto h = cache.hidden.middleRows(r0, r1 - r0);
    h = h.cwiseMax(Scalar(0));
    if (dropped)
      cache.hidden_dropped.middleRows(r0, r1 - r0) = h.cwiseProduct(cache.drop.middleRows(r0, r1 - r0));
  });
  linear2.forward(dropped ? cache.hidden_dropped : cache.hidden, y);
}

void FeedForward::backward(const Eigen::Ref<const Mat>& dy, const Eigen::Ref<const Mat>& x,
                           const FeedForwardCache& cache, Mat& dx) const {
  const Mat& h2 = cache.drop.size() > 0 ? cache.hidden_dropped : cache.hidden;
  Mat dh;
  linear2.backward(dy, h2, dh);
  const bool dropped = cache.drop.size() > 0;
  // Dropout's mask, then ReLU's (the gradient passes where the output was positive).
  parallel_blocks(dh.rows(), double(dh.size()), [&](Index r0, Index r1) {
    auto g = dh.middleRows(r0, r1 - r0);
    if (dropped) g.array() *= cache.drop.middleRows(r0, r1 - r0).array();
    g = (cache.hidden.middleRows(r0, r1 - r0).array() > Scalar(0)).select(g, Scalar(0));
  });
  linear1.backward(dh, x, dx);
}

// ---------------------------------------------------------------------------------------------
// Embedding

Embedding::Embedding(ParamRegistry& reg, const std::string& prefix, Index vocab_size,
                     Index d_model, Index max_positions)
    : weight(reg.add(prefix + ".weight", {vocab_size, d_model})),
      max_positions_(max_positions),
      scale_(static_cast<Scalar>(std::sqrt(static_cast<double>(d_model)))) {
  for (Index i = 0; i < d_model; i += 2)
    wavelength_divisors_.push_back(std::pow(10000.0, static_cast<double>(i) / static_cast<double>(d_model)));
}

template <typename LengthOf, typename OffsetOf>
void Embedding::embed_rows(const TokenIds& ids, int batch, LengthOf length_of, OffsetOf offset_of,
                           int longest, int max_len, int first_position,
                           const Scalar* word_drop, Mat& out) const {
  ANUVAD_CHECK_SHAPE(first_position >= 0 && Index(first_position) + max_len <= max_positions_,
                     "sequence of " + std::to_string(Index(first_position) + max_len) +
                         " tokens exceeds max_positions " + std::to_string(max_positions_));
  for (const int32_t id : ids)
    ANUVAD_CHECK_SHAPE(id >= 0 && id < weight.rows(),
                       weight.name + ": token id " + std::to_string(id) + " out of range");
  const Index d = weight.cols();
  out.resize(static_cast<Index>(ids.size()), d);
  if (batch == 0) return;
  // PE is computed per position, not stored: a [max_positions, D] table would cost memory in
  // proportion to a config value (a hostile model file's, too). Row t of the longest sequence
  // receives PE[first_position + t] first and is the source the other sequences add from, and
  // it is overwritten last by the same expression, so every row is E[id]·√D + PE[pos] computed
  // alike (E[id]·(√D·m) + PE[pos] under word dropout).
  auto scale_of = [&](Index r) { return word_drop ? scale_ * word_drop[r] : scale_; };
  for (int t = 0; t < max_len; ++t) {
    const Index src_row = offset_of(longest) + t;
    auto pe = out.row(src_row);
    const double p = static_cast<double>(first_position + t);
    for (Index i = 0; i < d; i += 2) {
      const double angle = p / wavelength_divisors_[size_t(i / 2)];
      pe(i) = static_cast<Scalar>(std::sin(angle));
      if (i + 1 < d) pe(i + 1) = static_cast<Scalar>(std::cos(angle));
    }
    for (int b = 0; b < batch; ++b) {
      if (b == longest || length_of(b) <= t) continue;
      const Index r = offset_of(b) + t;
      add_row(ids[size_t(r)], scale_of(r), pe.data(), out.row(r).data());
    }
    add_row(ids[size_t(src_row)], scale_of(src_row), pe.data(), pe.data());
  }
}

void Embedding::add_row(int32_t id, Scalar scale, const Scalar* pe, Scalar* dst) const {
  const Index d = weight.cols();
  Eigen::Map<RowVec> out(dst, d);
  const Eigen::Map<const RowVec> p(pe, d);
  if (!weight.int8.empty()) {  // a tied output projection in int8: its row dequantized
    const float s = weight.int8.scale[size_t(id)];
    for (Index i = 0; i < d; ++i) dst[i] = static_cast<Scalar>(float(weight.int8.at(id, i)) * s) * scale + pe[i];
    return;
  }
  if (weight.bf16.empty()) {
    out = weight.value.row(id) * scale + p;  // element-wise: dst may be pe
    return;
  }
  const uint16_t* e = weight.bf16.row(id);
  for (Index i = 0; i < d; ++i) dst[i] = static_cast<Scalar>(bf16_to_float(e[i])) * scale + pe[i];
}

void Embedding::forward(const TokenIds& ids, int batch, int len, int first_position,
                        Mat& out) const {
  ANUVAD_CHECK_SHAPE(static_cast<Index>(ids.size()) == Index(batch) * len,
                     weight.name + ": ids size does not match batch × length");
  embed_rows(
      ids, batch, [len](int) { return len; }, [len](int b) { return Index(b) * len; }, 0, len,
      first_position, nullptr, out);
}

void Embedding::forward(const TokenIds& ids, const Packing& rows, Mat& out, const Mat& word_drop) const {
  ANUVAD_CHECK_SHAPE(static_cast<Index>(ids.size()) == rows.rows(),
                     weight.name + ": ids size does not match the packed rows");
  ANUVAD_CHECK_SHAPE(word_drop.size() == 0 || (word_drop.rows() == rows.rows() && word_drop.cols() == 1),
                     weight.name + ": word dropout is not one multiplier per row");
  int longest = 0;
  for (int b = 0; b < rows.batch_size(); ++b)
    if (rows.lengths[b] > rows.lengths[longest]) longest = b;
  embed_rows(
      ids, rows.batch_size(), [&rows](int b) { return rows.lengths[b]; },
      [&rows](int b) { return Index(rows.offsets[b]); }, longest, rows.max_length, 0,
      word_drop.size() > 0 ? word_drop.data() : nullptr, out);
}

void Embedding::backward(const Eigen::Ref<const Mat>& dout, const TokenIds& ids, const Mat& word_drop) const {
  // forward: out[r] = E[id_r]·√D·m_r + PE[pos_r]  ⇒  dE[id_r] += dout[r]·√D·m_r
  ANUVAD_CHECK_SHAPE(weight.is_float(), weight.name + ": backward on bfloat16 or int8 weights");
  Mat& grad = weight.grad_acc();
  if (word_drop.size() == 0) {
    for (Index r = 0; r < dout.rows(); ++r) grad.row(ids[r]) += dout.row(r) * scale_;
    return;
  }
  ANUVAD_CHECK_SHAPE(word_drop.rows() == dout.rows(), weight.name + ": word dropout rows do not match");
  for (Index r = 0; r < dout.rows(); ++r)
    if (word_drop(r, 0) != Scalar(0)) grad.row(ids[r]) += dout.row(r) * (scale_ * word_drop(r, 0));
}

// ---------------------------------------------------------------------------------------------
// Residual sublayer

namespace {

/// out = a + b ⊙ m (out = a + b when m is empty) over row blocks split across the threads;
/// a, b, m: [n, d]. out is resized to [n, d].
void add_masked(const Mat& a, const Mat& b, const Mat& m, Mat& out) {
  out.resize(a.rows(), a.cols());
  parallel_blocks(a.rows(), double(a.size()), [&](Index r0, Index r1) {
    const Index n = r1 - r0;
    if (m.size() > 0) {
      out.middleRows(r0, n) = a.middleRows(r0, n) + b.middleRows(r0, n).cwiseProduct(m.middleRows(r0, n));
    } else {
      out.middleRows(r0, n) = a.middleRows(r0, n) + b.middleRows(r0, n);
    }
  });
}

}  // namespace

void residual_forward(const Mat& x, const LayerNorm& ln, bool pre_norm, Scalar dropout,
                      const DropoutContext& dctx, const SublayerForward& f, ResidualCache& cache,
                      Mat& y) {
  if (pre_norm) {
    ln.forward(x, cache.f_in, cache.ln);
  } else {
    cache.f_in.resize(x.rows(), x.cols());
    parallel_blocks(x.rows(), double(x.size()), [&](Index r0, Index r1) {
      cache.f_in.middleRows(r0, r1 - r0) = x.middleRows(r0, r1 - r0);
    });
  }
  f(cache.f_in, cache.f_out);
  make_dropout_mask(x.cols(), dropout, dctx, cache.drop);
  ANUVAD_CHECK_SHAPE(cache.drop.size() == 0 || cache.drop.rows() == x.rows(),
                     "residual: the dropout rows do not match the input");
  if (pre_norm) {
    add_masked(x, cache.f_out, cache.drop, y);
  } else {
    add_masked(x, cache.f_out, cache.drop, cache.sum);
    ln.forward(cache.sum, y, cache.ln);
  }
}

void residual_backward(const Mat& dy, const LayerNorm& ln, bool pre_norm,
                       const SublayerBackward& fb, const ResidualCache& cache, Mat& dx) {
  Mat dsum;
  const Mat* dres = &dy;  // gradient at x + dropout(f(·))
  if (!pre_norm) {
    ln.backward(dy, cache.ln, dsum);
    dres = &dsum;
  }
  Mat df_out;  // the gradient at f's output: dres ⊙ mask (dres itself without dropout)
  if (cache.drop.size() > 0) {
    df_out.resize(dres->rows(), dres->cols());
    parallel_blocks(dres->rows(), double(dres->size()), [&](Index r0, Index r1) {
      df_out.middleRows(r0, r1 - r0) =
          dres->middleRows(r0, r1 - r0).cwiseProduct(cache.drop.middleRows(r0, r1 - r0));
    });
  }
  Mat df_in;
  fb(cache.drop.size() > 0 ? df_out : *dres, df_in);
  if (pre_norm) {
    Mat dln;
    ln.backward(df_in, cache.ln, dln);
    add_masked(*dres, dln, Mat(), dx);
  } else {
    add_masked(*dres, df_in, Mat(), dx);
  }
}

}  // namespace anuvad
