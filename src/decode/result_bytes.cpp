// Decoding results as bytes (include/anuvad/decode/result_bytes.h).
#include "anuvad/decode/result_bytes.h"

#include <cstring>
#include <type_traits>

#include "anuvad/core/error.h"

namespace anuvad {

namespace {

/// Appends values, vectors of plain values and matrices to a string, as raw bytes.
class ByteWriter {
 public:
  explicit ByteWriter(std::string& out) : out_(out) {}
  template <class T>
  void value(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>, "only plain values are copied as bytes");
    raw(&v, sizeof v);
  }
  template <class T>
  void values(const std::vector<T>& v) {
    static_assert(std::is_trivially_copyable_v<T>, "only plain values are copied as bytes");
    value(uint64_t{v.size()});
    raw(v.data(), v.size() * sizeof(T));
  }
  void matrix(const Mat& m) {
    value(int64_t{m.rows()});
    value(int64_t{m.cols()});
    raw(m.data(), static_cast<size_t>(m.size()) * sizeof(Scalar));
  }
  void matrices(const std::vector<Mat>& ms) {
    value(uint64_t{ms.size()});
    for (const Mat& m : ms) matrix(m);
  }

 private:
  void raw(const void* p, size_t n) {
    if (n > 0) out_.append(static_cast<const char*>(p), n);
  }
  std::string& out_;
};

/// Reads back what ByteWriter wrote, in the same order; throws DataError past the end.
class ByteReader {
 public:
  ByteReader(const std::string& in, size_t& pos) : in_(in), pos_(pos) {}
  template <class T>
  T value() {
    T v;
    std::memcpy(&v, take(sizeof v), sizeof v);
    return v;
  }
  template <class T>
  std::vector<T> values() {
    std::vector<T> v(count(sizeof(T)));
    copy(v.data(), v.size() * sizeof(T));
    return v;
  }
  Mat matrix() {
    const auto rows = value<int64_t>(), cols = value<int64_t>();
    const uint64_t most_rows = cols > 0 ? left() / sizeof(Scalar) / static_cast<uint64_t>(cols) : 0;
    if (rows < 0 || cols < 0 || (cols > 0 && static_cast<uint64_t>(rows) > most_rows)) fail();
    Mat m(rows, cols);
    copy(m.data(), static_cast<size_t>(m.size()) * sizeof(Scalar));
    return m;
  }
  std::vector<Mat> matrices() {
    std::vector<Mat> ms(count(2 * sizeof(int64_t)));
    for (Mat& m : ms) m = matrix();
    return ms;
  }
  /// A count of items of at least `item_bytes` bytes each, checked against the bytes left.
  size_t count(size_t item_bytes) {
    const auto n = value<uint64_t>();
    if (item_bytes > 0 && n > left() / item_bytes) fail();
    return static_cast<size_t>(n);
  }

 private:
  size_t left() const { return in_.size() - pos_; }
  /// Copies the next n bytes to `to` (nothing when n is 0: `to` may then be null).
  void copy(void* to, size_t n) {
    const char* from = take(n);
    if (n > 0) std::memcpy(to, from, n);
  }
  const char* take(size_t n) {
    if (n > left()) fail();
    const char* p = in_.data() + pos_;
    pos_ += n;
    return p;
  }
  [[noreturn]] void fail() const {
    throw DataError("decoding results from another rank: bytes end inside a record at offset " +
                    std::to_string(pos_) + " of " + std::to_string(in_.size()));
  }
  const std::string& in_;
  size_t& pos_;
};

void write_hypothesis(ByteWriter& w, const Hypothesis& h) {
  w.values(h.tokens);
  w.values(h.token_scores);
  w.value(h.score);
  w.value(h.finished);
  w.value(h.normalized_score);
  w.matrices(h.attention.encoder_self);
  w.matrices(h.attention.decoder_self);
  w.matrices(h.attention.cross);
}

Hypothesis read_hypothesis(ByteReader& r) {
  Hypothesis h;
  h.tokens = r.values<int32_t>();
  h.token_scores = r.values<double>();
  h.score = r.value<double>();
  h.finished = r.value<bool>();
  h.normalized_score = r.value<double>();
  h.attention.encoder_self = r.matrices();
  h.attention.decoder_self = r.matrices();
  h.attention.cross = r.matrices();
  return h;
}

void write_trace(ByteWriter& w, const SentenceTrace& t) {
  w.value(uint64_t{t.steps.size()});
  for (const auto& step : t.steps) {
    w.value(uint64_t{step.size()});
    for (const TraceHypothesis& h : step) {
      w.value(h.id);
      w.value(h.parent);
      w.value(h.token);
      w.value(h.logprob);
      w.value(h.score);
      w.value(h.normalized);
      w.matrix(h.cross);
      w.values(h.candidates);
    }
  }
  w.values(t.finished);
  w.values(t.n_best);
}

SentenceTrace read_trace(ByteReader& r) {
  SentenceTrace t;
  t.steps.resize(r.count(sizeof(uint64_t)));
  for (auto& step : t.steps) {
    step.resize(r.count(sizeof(int) * 2));
    for (TraceHypothesis& h : step) {
      h.id = r.value<int>();
      h.parent = r.value<int>();
      h.token = r.value<int32_t>();
      h.logprob = r.value<double>();
      h.score = r.value<double>();
      h.normalized = r.value<double>();
      h.cross = r.matrix();
      h.candidates = r.values<TraceCandidate>();
    }
  }
  t.finished = r.values<TraceFinished>();
  t.n_best = r.values<int>();
  return t;
}

}  // namespace

void append_result_bytes(std::string& out, uint64_t index, const std::vector<Hypothesis>& n_best,
                         const SentenceTrace* trace) {
  ByteWriter w(out);
  w.value(index);
  w.value(uint64_t{n_best.size()});
  for (const Hypothesis& h : n_best) write_hypothesis(w, h);
  w.value(trace != nullptr);
  if (trace != nullptr) write_trace(w, *trace);
}

SourceResult read_result_bytes(const std::string& bytes, size_t& pos) {
  ByteReader r(bytes, pos);
  SourceResult s;
  s.index = r.value<uint64_t>();
  s.n_best.resize(r.count(sizeof(uint64_t)));
  for (Hypothesis& h : s.n_best) h = read_hypothesis(r);
  s.has_trace = r.value<bool>();
  if (s.has_trace) s.trace = read_trace(r);
  return s;
}

}  // namespace anuvad
