// Data-parallel helpers of include/anuvad/train/replicas.h.
#include "anuvad/train/replicas.h"

#include <unistd.h>

#include <chrono>
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

GradientSum::Timing GradientSum::reduce_into(ParamRegistry& params) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  barrier();  // (separates the wait for the slowest rank from the allreduce's own time)
  const auto t1 = Clock::now();
  allreduce_sum(sum_.data(), sum_.size());
  const Timing timing{std::chrono::duration<double>(t1 - t0).count(),
                      std::chrono::duration<double>(Clock::now() - t1).count()};
  const Scalar* in = sum_.data();
  for (Param& p : params.params()) {
    std::memcpy(p.grad.data(), in, static_cast<size_t>(p.grad.size()) * sizeof(Scalar));
    in += p.grad.size();
  }
  empty_ = true;
  return timing;
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
