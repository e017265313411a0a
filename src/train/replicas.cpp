// Data-parallel helpers of include/anuvad/train/replicas.h.
#include "anuvad/train/replicas.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "anuvad/core/distributed.h"
#include "anuvad/core/error.h"

namespace anuvad {

std::pair<size_t, size_t> shard_range(size_t batch_size, int shard, int shards) {
  const auto k = static_cast<size_t>(shard), n = static_cast<size_t>(shards);
  return {batch_size * k / n, batch_size * (k + 1) / n};
}

void GradientSum::ensure_size(const ParamRegistry& params) {
  const auto n = static_cast<size_t>(params.num_elements());
  if (sum_.size() != n) sum_.assign(n, Scalar(0));
}

void GradientSum::add(const ParamRegistry& params) {
  ensure_size(params);
  Scalar* out = sum_.data();
  for (const Param& p : params.params()) {
    const Scalar* g = p.grad.data();
    const auto n = static_cast<size_t>(p.grad.size());
    if (empty_) {
      std::memcpy(out, g, n * sizeof(Scalar));
    } else {
      for (size_t i = 0; i < n; ++i) out[i] += g[i];
    }
    out += n;
  }
  empty_ = false;
}

void GradientSum::add_zero(const ParamRegistry& params) {
  ensure_size(params);
  if (empty_) std::fill(sum_.begin(), sum_.end(), Scalar(0));
  empty_ = false;
}

namespace {
/// Copies the gradients of params [first, last) (registry order) from/to a flat buffer.
void pack(const ParamRegistry& params, size_t first, size_t last, Scalar* out) {
  for (size_t i = first; i < last; ++i) {
    const Mat& g = params.params()[i].grad;
    std::memcpy(out, g.data(), static_cast<size_t>(g.size()) * sizeof(Scalar));
    out += g.size();
  }
}
void unpack(const Scalar* in, size_t first, size_t last, ParamRegistry& params) {
  for (size_t i = first; i < last; ++i) {
    Mat& g = params.params()[i].grad;
    std::memcpy(g.data(), in, static_cast<size_t>(g.size()) * sizeof(Scalar));
    in += g.size();
  }
}
}  // namespace

void GradientSum::reduce_into(ParamRegistry& params) {
  allreduce_sum(sum_.data(), sum_.size());
  unpack(sum_.data(), 0, params.params().size(), params);
  empty_ = true;
}

AllreduceMode parse_allreduce_mode(const std::string& name) {
  if (name == "fused") return AllreduceMode::kFused;
  if (name == "overlap") return AllreduceMode::kOverlap;
  if (name == "overlap-lazy") return AllreduceMode::kOverlapLazy;
  throw ConfigError("--allreduce: '" + name + "' is not fused, overlap or overlap-lazy");
}

GradientBuckets::GradientBuckets(const ParamRegistry& params, size_t bucket_bytes, bool poll)
    : poll_(poll) {
  if (bucket_bytes == 0) throw ConfigError("--allreduce-bucket-mb must be > 0");
  const auto& ps = params.params();
  size_t last = ps.size(), bytes = 0;
  for (size_t i = ps.size(); i-- > 0;) {
    bytes += static_cast<size_t>(ps[i].value.size()) * sizeof(Scalar);
    if (bytes >= bucket_bytes || i == 0) {
      buckets_.push_back({i, last, {}});
      last = i;
      bytes = 0;
    }
  }
  std::reverse(buckets_.begin(), buckets_.end());
  for (Bucket& b : buckets_) {
    size_t n = 0;
    for (size_t i = b.first; i < b.last; ++i) n += static_cast<size_t>(ps[i].value.size());
    b.sum.assign(n, Scalar(0));  // (touched once here, not at every update)
  }
  unstarted_ = buckets_.size();
}

void GradientBuckets::gradients_final(const ParamRegistry& params, size_t first_final) {
  for (; unstarted_ > 0 && buckets_[unstarted_ - 1].first >= first_final; --unstarted_) {
    Bucket& b = buckets_[unstarted_ - 1];
    pack(params, b.first, b.last, b.sum.data());
    sums_.start(b.sum.data(), b.sum.size());
  }
  if (poll_) sums_.test();
}

void GradientBuckets::finish(ParamRegistry& params) {
  if (unstarted_ > 0) throw Error("GradientBuckets::finish: " + std::to_string(unstarted_) + " buckets never started");
  sums_.wait();
  for (const Bucket& b : buckets_) unpack(b.sum.data(), b.first, b.last, params);
  unstarted_ = buckets_.size();
}

uint64_t weights_hash(const ParamRegistry& params) {
  uint64_t h = 14695981039346656037ull;
  for (const Param& p : params.params()) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(p.value.data());
    const size_t n = static_cast<size_t>(p.value.size()) * sizeof(Scalar);
    for (size_t i = 0; i < n; ++i) h = (h ^ bytes[i]) * 1099511628211ull;
  }
  return h;
}

void check_replicas_identical(const ParamRegistry& params, int64_t step) {
  if (world_size() <= 1) return;
  if (!same_on_all_ranks(weights_hash(params)))
    throw NumericError("step " + std::to_string(step) +
                       ": the weights of the ranks differ (data-parallel replicas diverged)");
}

void broadcast_weights(ParamRegistry& params) {
  for (Param& p : params.params()) broadcast(p.value.data(), static_cast<size_t>(p.value.size()));
}

void broadcast_tokenizers(std::unique_ptr<Tokenizer>& src, std::unique_ptr<Tokenizer>& tgt) {
  if (world_size() <= 1) return;
  for (std::unique_ptr<Tokenizer>* tok : {&src, &tgt}) {
    std::string proto = is_root_rank() ? (*tok)->serialized() : std::string();
    broadcast(proto);
    if (!is_root_rank()) *tok = std::make_unique<Tokenizer>(Tokenizer::from_serialized(proto));
  }
}

Checkpoint broadcast_checkpoint(const std::string& path, const nlohmann::json& fingerprint, bool with_ema) {
  if (world_size() <= 1) return read_checkpoint(path, fingerprint, with_ema);
  std::string bytes;
  if (is_root_rank()) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    if (!in) throw IoError(path + ": cannot read the checkpoint");
    bytes = s.str();
  }
  broadcast(bytes);
  if (is_root_rank()) return read_checkpoint(path, fingerprint, with_ema);
  const std::filesystem::path copy = std::filesystem::temp_directory_path() /
      ("anuvad-rank" + std::to_string(world_rank()) + "-" + std::to_string(::getpid()) + ".checkpoint.safetensors");
  {
    std::ofstream out(copy, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw IoError(copy.string() + ": cannot write the copy of the checkpoint");
  }
  struct Remove {
    std::filesystem::path p;
    ~Remove() { std::error_code ec; std::filesystem::remove(p, ec); }
  } remove{copy};
  return read_checkpoint(copy.string(), fingerprint, with_ema);
}

}  // namespace anuvad
