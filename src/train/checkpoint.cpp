// Resumable checkpoints: TrainState ↔ JSON, state tensors ↔ F32, the checkpoint file itself.
#include "anuvad/train/checkpoint.h"

#include <omp.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "anuvad/core/error.h"
#include "anuvad/train/validator.h"

namespace anuvad {

namespace {

constexpr StateTensor kStateTensors[] = {StateTensor::kAdamFirstMoment,
                                         StateTensor::kAdamSecondMoment, StateTensor::kEma};

/// The prefix every state tensor name starts with, handed to model_from_safetensors as the
/// names to skip ("ema." tensors are taken out before).
constexpr const char* kAdamPrefix = "adam.";

const char* prefix(StateTensor kind) {
  switch (kind) {
    case StateTensor::kAdamFirstMoment: return "adam.m.";
    case StateTensor::kAdamSecondMoment: return "adam.v.";
    case StateTensor::kEma: return "ema.";
  }
  return "";
}

/// The matrices of one kind in a TrainState (or a const one).
template <class State>
auto& matrices(State& st, StateTensor kind) {
  return kind == StateTensor::kAdamFirstMoment    ? st.adam_m
         : kind == StateTensor::kAdamSecondMoment ? st.adam_v
                                                  : st.ema;
}

/// A metadata value of checkpoint `path`; throws ModelFileError when it is missing.
const std::string& metadata(const SafetensorsFile& f, const std::string& path, const std::string& key) {
  const auto it = f.metadata.find(key);
  if (it == f.metadata.end())
    throw ModelFileError(path + ": not an anuvad checkpoint (metadata \"" + key + "\" missing)");
  return it->second;
}

/// Throws ConfigError naming the first key of `fingerprint` (in key order) whose value differs
/// in `saved`, or is missing there, or else the first key only `saved` has (an option left
/// out of a fingerprint at its default, e.g. rdrop_alpha 0).
void check_fingerprint(const nlohmann::json& saved, const nlohmann::json& fingerprint,
                       const std::string& path) {
  for (auto it = saved.begin(); it != saved.end(); ++it)
    if (!fingerprint.contains(it.key()))
      throw ConfigError(path + ": checkpoint was written with another " + it.key() + " (" + it.value().dump() +
                        " instead of the default); rerun with the same options, or pass --no-resume to start over");
  for (auto it = fingerprint.begin(); it != fingerprint.end(); ++it)
    if (!saved.contains(it.key()) || saved[it.key()] != it.value())
      throw ConfigError(path + ": checkpoint was written with another " + it.key() + " (" +
                        (saved.contains(it.key()) ? saved[it.key()].dump() : "none") +
                        " instead of " + it.value().dump() +
                        "); rerun with the same options, or pass --no-resume to start over");
}

/// Moves the state tensors (names starting with "adam." or "ema.") out of `f`.
std::map<std::string, RawTensor> take_state_tensors(SafetensorsFile& f) {
  std::map<std::string, RawTensor> out;
  for (auto it = f.tensors.begin(); it != f.tensors.end();) {
    if (it->first.rfind(kAdamPrefix, 0) == 0 || it->first.rfind(prefix(StateTensor::kEma), 0) == 0) {
      out[it->first] = std::move(it->second);
      it = f.tensors.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

}  // namespace

nlohmann::json TrainState::counters_to_json() const {
  const double best_ce = best_cross_entropy(best_valid);
  return {{"step", step}, {"epoch", epoch}, {"next_batch", next_batch},
          {"rng_epoch_start", rng_epoch_start}, {"rng", rng}, {"epoch_loss", epoch_loss},
          {"epoch_tokens", epoch_tokens}, {"tokens_total", tokens_total},
          {"elapsed_seconds", elapsed_seconds}, {"stalled", stalled}, {"lr_scale", lr_scale},
          {"best_ce", std::isfinite(best_ce) ? nlohmann::json(best_ce) : nlohmann::json(nullptr)},
          {"epoch_losses", epoch_losses}, {"best_valid", best_valid}};
}

void TrainState::counters_from_json(const nlohmann::json& j) {
  try {
    step = j.at("step").get<int64_t>();
    epoch = j.at("epoch").get<int>();
    next_batch = j.at("next_batch").get<int64_t>();
    rng_epoch_start = j.at("rng_epoch_start").get<std::string>();
    rng = j.at("rng").get<std::string>();
    epoch_loss = j.at("epoch_loss").get<double>();
    epoch_tokens = j.at("epoch_tokens").get<int64_t>();
    tokens_total = j.at("tokens_total").get<int64_t>();
    elapsed_seconds = j.at("elapsed_seconds").get<double>();
    stalled = j.at("stalled").get<int>();
    lr_scale = j.value("lr_scale", 1.0);  // absent before --lr-decay existed
    epoch_losses = j.at("epoch_losses").get<std::vector<double>>();
    best_valid = j.at("best_valid").get<std::map<std::string, double>>();
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(std::string("checkpoint state: ") + e.what());
  }
  if (step < 0 || epoch < 1 || next_batch < 0) throw ConfigError("checkpoint state: negative position");
  if (!(lr_scale > 0 && lr_scale <= 1)) throw ConfigError("checkpoint state: lr_scale not in (0, 1]");
}

std::string state_tensor_name(StateTensor kind, const std::string& param) {
  return prefix(kind) + param;
}

RawTensor pack_f32(const Mat& m, const std::vector<int64_t>& shape) {
  RawTensor t;
  t.dtype = "F32";
  t.shape = shape;
  t.bytes.resize(size_t(m.size()) * sizeof(float));
  for (Index k = 0; k < m.size(); ++k) {
    const float x = static_cast<float>(m.data()[k]);
    std::memcpy(&t.bytes[size_t(k) * sizeof(float)], &x, sizeof(float));
  }
  return t;
}

Mat unpack_f32(const RawTensor& t, Index rows, Index cols, const std::string& what) {
  if (t.dtype != "F32" || t.bytes.size() != size_t(rows) * size_t(cols) * sizeof(float))
    throw ModelFileError(what + " missing or misshapen");
  Mat m(rows, cols);
  for (Index i = 0; i < m.size(); ++i) {
    float x;
    std::memcpy(&x, &t.bytes[size_t(i) * sizeof(float)], sizeof(float));
    m.data()[i] = static_cast<Scalar>(x);
  }
  return m;
}

std::string checkpoint_path(const std::string& model_path) {
  std::filesystem::path p(model_path);
  return (p.parent_path() / (p.stem().string() + ".checkpoint" + p.extension().string())).string();
}

std::string file_content_hash(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(path + ": cannot open to hash it");
  uint64_t h = 14695981039346656037ULL;  // FNV-1a 64-bit offset basis
  std::vector<char> buf(1 << 16);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    for (std::streamsize i = 0; i < in.gcount(); ++i) {
      h ^= static_cast<unsigned char>(buf[static_cast<size_t>(i)]);
      h *= 1099511628211ULL;  // FNV-1a 64-bit prime
    }
  }
  if (in.bad()) throw IoError(path + ": read error while hashing it");
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return std::string("fnv1a64:") + hex;
}

nlohmann::json corpus_hashes(const std::vector<std::string>& paths) {
  nlohmann::json j = nlohmann::json::object();
  for (const std::string& p : paths) j[p] = file_content_hash(p);
  return j;
}

void check_corpus_unchanged(const nlohmann::json& saved, const nlohmann::json& current,
                            const std::string& checkpoint) {
  if (saved.is_null()) return;
  for (auto it = current.begin(); it != current.end(); ++it)
    if (!saved.contains(it.key()) || saved[it.key()] != it.value())
      throw DataError(it.key() + ": changed since the checkpoint " + checkpoint +
                      " was written (content hash " + it.value().get<std::string>() + ", was " +
                      (saved.contains(it.key()) && saved[it.key()].is_string() ? saved[it.key()].get<std::string>() : "none") +
                      "); restore it, or pass --no-resume to start over");
}

void write_checkpoint(const std::string& path, const Transformer& model, const Tokenizer& src,
                      const Tokenizer& tgt, const nlohmann::json& fingerprint,
                      const TrainState& state, const nlohmann::json& hashes) {
  std::map<std::string, std::string> meta = {{"training_options", fingerprint.dump()},
                                             {"training_state", state.counters_to_json().dump()},
                                             {"threads", std::to_string(omp_get_max_threads())}};
  if (!hashes.is_null()) meta["corpus_hashes"] = hashes.dump();
  SafetensorsFile f = model_to_safetensors(model, src, tgt, meta);
  const auto& params = model.params().params();
  for (size_t i = 0; i < params.size(); ++i)
    for (StateTensor kind : kStateTensors) {
      const std::vector<Mat>& mats = matrices(state, kind);
      if (mats.empty()) continue;  // no EMA without smoothing
      f.tensors[state_tensor_name(kind, params[i].name)] = pack_f32(mats[i], params[i].shape);
    }
  write_safetensors(path, f);
}

Checkpoint read_checkpoint(const std::string& path, const nlohmann::json& fingerprint, bool with_ema) {
  SafetensorsFile f = read_safetensors(path);
  nlohmann::json saved_options, state_json;
  try {
    saved_options = nlohmann::json::parse(metadata(f, path, "training_options"));
    state_json = nlohmann::json::parse(metadata(f, path, "training_state"));
  } catch (const nlohmann::json::exception&) {
    throw ModelFileError(path + ": checkpoint metadata is not valid JSON");
  }
  // The model config as this version writes it: a key added since (e.g. layer_dropout) reads
  // as its default, so that a checkpoint written before it still resumes.
  if (saved_options.contains("config")) {
    try {
      saved_options["config"] = ModelConfig::from_json(saved_options["config"], path).to_json();
    } catch (const ConfigError& e) {
      throw ModelFileError(std::string(e.what()));
    }
  }
  check_fingerprint(saved_options, fingerprint, path);
  const std::string& threads = metadata(f, path, "threads");
  if (threads != std::to_string(omp_get_max_threads()))
    spdlog::warn("checkpoint was written with {} threads, now {}: the run will not be bit-identical",
                 threads, omp_get_max_threads());
  Checkpoint c;
  try {
    const auto hashes = f.metadata.find("corpus_hashes");
    if (hashes != f.metadata.end()) c.corpus_hashes = nlohmann::json::parse(hashes->second);
  } catch (const nlohmann::json::exception&) {
    throw ModelFileError(path + ": checkpoint metadata corpus_hashes is not valid JSON");
  }
  try {
    c.state.counters_from_json(state_json);
  } catch (const ConfigError& e) {
    throw ModelFileError(path + ": " + e.what());
  }
  std::map<std::string, RawTensor> state_tensors = take_state_tensors(f);
  c.model = model_from_safetensors(std::move(f), path, kAdamPrefix);
  for (const Param& p : c.model.transformer->params().params())
    for (StateTensor kind : kStateTensors) {
      if (kind == StateTensor::kEma && !with_ema) continue;
      const std::string name = state_tensor_name(kind, p.name);
      const std::string what = path + ": optimizer/EMA tensor " + name;
      const auto it = state_tensors.find(name);
      if (it == state_tensors.end()) throw ModelFileError(what + " missing or misshapen");
      matrices(c.state, kind).push_back(unpack_f32(it->second, p.value.rows(), p.value.cols(), what));
    }
  return c;
}

void check_state_matches(const TrainState& state, const ParamRegistry& params, bool with_ema) {
  const auto& ps = params.params();
  const size_t n = ps.size();
  auto same_shape = [](const Mat& a, const Mat& b) { return a.rows() == b.rows() && a.cols() == b.cols(); };
  if (state.adam_m.size() != n || state.adam_v.size() != n)
    throw ConfigError("checkpoint: optimizer state does not match the model");
  for (size_t i = 0; i < n; ++i)
    if (!same_shape(state.adam_m[i], ps[i].value) || !same_shape(state.adam_v[i], ps[i].value))
      throw ConfigError("checkpoint: optimizer state of " + ps[i].name + " has the wrong shape");
  if (!with_ema) return;
  if (state.ema.size() != n) throw ConfigError("checkpoint: EMA weights do not match the model");
  for (size_t i = 0; i < n; ++i)
    if (!same_shape(state.ema[i], ps[i].value))
      throw ConfigError("checkpoint: EMA weights of " + ps[i].name + " have the wrong shape");
}

}  // namespace anuvad
