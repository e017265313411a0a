// oneDNN's bfloat16 matmul behind bf16_affine (src/core/bf16_onednn.h). Built with
// ANUVAD_WITH_ONEDNN when CMake finds oneDNN (libdnnl-dev); otherwise the path is absent and
// onednn_available() is false.
#include "bf16_onednn.h"

#include "anuvad/core/error.h"
#include "anuvad/core/parallel.h"

#ifdef ANUVAD_WITH_ONEDNN
#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>
#include <unordered_map>
#include <vector>
#endif

namespace anuvad::detail {

#ifdef ANUVAD_WITH_ONEDNN

/// A Bf16Matrix's weights [k, n] in the layout oneDNN chose for a 64-row product (one layout
/// serves every row count: its brgemm kernels take it for 1 to 256 rows).
struct OnednnWeights {
  std::once_flag once;
  dnnl::memory packed;
};

namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;
using dims = dnnl::memory::dims;

const dnnl::engine& engine() {
  static const dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

/// Rows of the primitive that multiplies m rows (the extra rows are zeros): m itself up to 16,
/// m rounded up to 4 up to 64, else to 16. oneDNN's time grows with the rows it is given, not
/// with the real ones, while each new row count costs a primitive (~0.3 ms to make, ~75 KiB
/// kept; measured on AMD EPYC family 26, 2 threads). Base's 36 encoder products of one
/// 12-token sentence: 1.58 ms rounded to 16 rows, 1.29 exact; beam 4 at batch 1 (4 rows per
/// step, 8 before): +13 % tok/s base, +17 % small (tests/bench/README.md, "Exact row counts").
Index padded_rows(Index m) { return m <= 16 ? m : m <= 64 ? (m + 3) / 4 * 4 : (m + 15) / 16 * 16; }

dnnl::memory::desc rows_desc(Index m, Index cols, dt type) { return {dims{m, cols}, type, tag::ab}; }

/// The packed weight layout for [k, n] (oneDNN's choice for 64 rows), made once per shape.
dnnl::memory::desc packed_weights_desc(Index k, Index n) {
  static std::mutex mutex;
  static std::map<std::pair<Index, Index>, dnnl::memory::desc> layouts;
  const std::lock_guard<std::mutex> lock(mutex);
  auto it = layouts.find({k, n});
  if (it == layouts.end()) {
    const dnnl::matmul::primitive_desc pd(
        dnnl::matmul::desc(rows_desc(64, k, dt::bf16), dnnl::memory::desc(dims{k, n}, dt::bf16, tag::any),
                           rows_desc(64, n, dt::f32)),
        engine());
    it = layouts.emplace(std::make_pair(k, n), pd.weights_desc()).first;
  }
  return it->second;
}

/// The matmul for `rows` (padded) × k by the packed [k, n], with a float32 bias [1, n] added in
/// its epilogue when `bias`, and the bytes of scratch memory it needs, made once per shape; the
/// reference stays valid (map nodes are never erased). The scratch memory is the caller's
/// (scratchpad_mode::user): Debian's oneDNN shares one library scratchpad between primitives
/// (built without DNNL_ENABLE_CONCURRENT_EXEC), which two threads decoding at once would
/// overwrite for each other.
struct Primitive {
  dnnl::matmul matmul;
  dnnl::memory::desc scratch;
};
const Primitive& primitive(Index rows, Index k, Index n, bool bias) {
  static std::mutex mutex;
  static std::map<std::tuple<Index, Index, Index, bool>, Primitive> primitives;
  const std::lock_guard<std::mutex> lock(mutex);
  auto it = primitives.find({rows, k, n, bias});
  if (it == primitives.end()) {  // a miss only: a decoding step takes this one lock
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const dnnl::memory::desc src = rows_desc(rows, k, dt::bf16), dst = rows_desc(rows, n, dt::f32);
    const dnnl::matmul::primitive_desc pd(
        bias ? dnnl::matmul::desc(src, packed_weights_desc(k, n), rows_desc(1, n, dt::f32), dst)
             : dnnl::matmul::desc(src, packed_weights_desc(k, n), dst),
        attr, engine());
    it = primitives.emplace(std::make_tuple(rows, k, n, bias), Primitive{dnnl::matmul(pd), pd.scratchpad_desc()}).first;
  }
  return it->second;
}

/// w's packed weights, reordered from its row-major [n, k] (= [k, n] in format "ba") on first use.
const dnnl::memory& packed(const Bf16Matrix& w) {
  OnednnWeights& slot = *w.onednn;
  std::call_once(slot.once, [&] {
    const dnnl::memory plain(dnnl::memory::desc(dims{w.cols, w.rows}, dt::bf16, tag::ba), engine(),
                             const_cast<uint16_t*>(w.data.data()));
    dnnl::memory out(packed_weights_desc(w.cols, w.rows), engine());
    dnnl::primitive_attr attr;  // its own scratch memory, as primitive() explains
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const dnnl::reorder::primitive_desc pd(plain, out, attr);
    std::vector<uint8_t> scratch(std::max<size_t>(1, pd.scratchpad_desc().get_size()));
    const dnnl::memory scratchpad(pd.scratchpad_desc(), engine(), scratch.data());
    dnnl::stream stream(engine());
    dnnl::reorder(pd).execute(stream, {{DNNL_ARG_FROM, plain}, {DNNL_ARG_TO, out}, {DNNL_ARG_SCRATCHPAD, scratchpad}});
    stream.wait();
    slot.packed = out;
  });
  return slot.packed;
}

/// oneDNN's error as a ConfigError naming the path.
[[noreturn]] void fail(const dnnl::error& e) { throw ConfigError(std::string("bf16 kernel onednn: ") + e.what()); }

}  // namespace

void onednn_pack(const Bf16Matrix& w) {
  if (!w.onednn) throw ConfigError("bf16 kernel onednn: this matrix has no oneDNN copy (oneDNN unavailable)");
  try {
    (void)packed(w);
  } catch (const dnnl::error& e) {
    fail(e);
  }
}

std::vector<uint16_t> onednn_unpack(const Bf16Matrix& w) {
  onednn_pack(w);
  std::vector<uint16_t> plain(size_t(w.rows * w.cols));
  try {
    dnnl::memory out(dnnl::memory::desc(dims{w.cols, w.rows}, dt::bf16, tag::ba), engine(), plain.data());
    dnnl::stream stream(engine());
    dnnl::reorder(w.onednn->packed, out).execute(stream, w.onednn->packed, out);
    stream.wait();
  } catch (const dnnl::error& e) {
    fail(e);
  }
  return plain;
}

bool onednn_available() {
  static const bool available = [] {
    const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    const auto bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
    return (isa & bf16) == bf16;
  }();
  return available;
}

std::shared_ptr<OnednnWeights> onednn_weights_slot() {
  return onednn_available() ? std::make_shared<OnednnWeights>() : nullptr;
}

void onednn_multiply(const float* x, Index ldx, Index m, const Bf16Matrix& w, const float* bias, float* y,
                     Index ldy) {
  if (!w.onednn) throw ConfigError("bf16 kernel onednn: this matrix has no oneDNN copy (oneDNN unavailable)");
  const Index k = w.cols, n = w.rows, rows = padded_rows(m);
  try {
    const dnnl::memory& weights = packed(w);
    // The activations rounded straight into the primitive's [rows, k] input, the padding rows
    // zero; the rows split across the threads when large (a serial pass here leaves the other
    // threads waiting between oneDNN's parallel products).
    thread_local std::vector<uint16_t> x_rows;
    thread_local std::vector<float> y_rows;
    x_rows.resize(size_t(rows * k));
    uint16_t* const xr = x_rows.data();  // the caller's buffer, also on the other threads
    parallel_blocks(m, double(m) * double(k), [&](Index r0, Index r1) { round_rows_to_bf16(x, ldx, r0, r1, k, xr); });
    std::fill(x_rows.begin() + m * k, x_rows.end(), uint16_t(0));
    const bool direct = rows == m && ldy == n;  // y itself is the primitive's [rows, n] output
    if (!direct) y_rows.resize(size_t(rows * n));
    const dnnl::memory src(rows_desc(rows, k, dt::bf16), engine(), xr);
    const dnnl::memory dst(rows_desc(rows, n, dt::f32), engine(), direct ? y : y_rows.data());
    thread_local dnnl::stream stream(engine());
    const Primitive& p = primitive(rows, k, n, bias != nullptr);
    thread_local std::vector<uint8_t> scratch;
    const size_t bytes = std::max<size_t>(1, p.scratch.get_size());
    if (scratch.size() < bytes) scratch.resize(bytes);
    const dnnl::memory scratchpad(p.scratch, engine(), scratch.data());
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}, {DNNL_ARG_SCRATCHPAD, scratchpad}};
    if (bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(rows_desc(1, n, dt::f32), engine(), const_cast<float*>(bias)));
    p.matmul.execute(stream, args);
    stream.wait();
    if (!direct)
      for (Index r = 0; r < m; ++r) std::memcpy(y + r * ldy, y_rows.data() + r * n, size_t(n) * sizeof(float));
  } catch (const dnnl::error& e) {
    fail(e);
  }
}

#else  // !ANUVAD_WITH_ONEDNN

struct OnednnWeights {};

bool onednn_available() { return false; }

std::shared_ptr<OnednnWeights> onednn_weights_slot() { return nullptr; }

void onednn_pack(const Bf16Matrix&) {
  throw ConfigError("bf16 kernel onednn: this build has no oneDNN (ANUVAD_ONEDNN)");
}

std::vector<uint16_t> onednn_unpack(const Bf16Matrix&) {
  throw ConfigError("bf16 kernel onednn: this build has no oneDNN (ANUVAD_ONEDNN)");
}

void onednn_multiply(const float*, Index, Index, const Bf16Matrix&, const float*, float*, Index) {
  throw ConfigError("bf16 kernel onednn: this build has no oneDNN (ANUVAD_ONEDNN)");
}

#endif

}  // namespace anuvad::detail
