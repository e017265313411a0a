// Model file save/load (layout: include/anuvad/io/model_file.h, docs/model-format.md).
#include "anuvad/io/model_file.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <spdlog/spdlog.h>

#include "anuvad/core/error.h"
#include "anuvad/io/safetensors.h"

namespace anuvad {

namespace {

constexpr const char* kFormat = "anuvad";
constexpr const char* kFormatVersion = "1";
constexpr const char* kNormalizationKey = "text_normalization";

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

}  // namespace

void save_model(const std::string& path, const Transformer& model, const Tokenizer& src_tokenizer,
                const Tokenizer& tgt_tokenizer,
                const std::map<std::string, std::string>& extra_metadata) {
  write_safetensors(path, model_to_safetensors(model, src_tokenizer, tgt_tokenizer, extra_metadata));
}

SafetensorsFile model_to_safetensors(const Transformer& model, const Tokenizer& src_tokenizer,
                                     const Tokenizer& tgt_tokenizer,
                                     const std::map<std::string, std::string>& extra_metadata) {
  SafetensorsFile f;
  f.metadata = extra_metadata;
  f.metadata["format"] = kFormat;
  f.metadata["format_version"] = kFormatVersion;
  f.metadata["config"] = model.config().to_json().dump();
  f.metadata.emplace(kNormalizationKey, normalization_name(TextNormalization::kNfcSpaces));
  if (model.compute_type() != ComputeType::kFloat32)
    throw ConfigError("a model whose weights were rounded to bfloat16 for decoding cannot be saved");
  for (const Param& p : model.params().params()) {
    // Written as float32 whatever the build's Scalar is, so every file looks the same.
    RawTensor t;
    t.dtype = "F32";
    t.shape = p.shape;
    t.bytes.resize(size_t(p.value.size()) * sizeof(float));
    for (Index i = 0; i < p.value.size(); ++i) {
      const float v = static_cast<float>(p.value.data()[i]);
      std::memcpy(&t.bytes[size_t(i) * sizeof(float)], &v, sizeof(float));
    }
    f.tensors[p.name] = std::move(t);
  }
  for (const auto& [name, tok] :
       {std::pair<const char*, const Tokenizer*>{"tokenizer.src", &src_tokenizer},
        std::pair<const char*, const Tokenizer*>{"tokenizer.tgt", &tgt_tokenizer}}) {
    RawTensor t;
    t.dtype = "U8";
    t.shape = {static_cast<int64_t>(tok->serialized().size())};
    t.bytes = tok->serialized();
    f.tensors[name] = std::move(t);
  }
  return f;
}

std::vector<int32_t> TranslationModel::encode_source(const std::string& text, const std::string& where) const {
  std::vector<int32_t> ids = src_tokenizer->encode(text);
  const size_t max_src = static_cast<size_t>(transformer->config().max_positions - 1);
  if (ids.size() > max_src) {
    spdlog::warn("{}: source has {} subwords, truncated to max_positions − 1 = {}", where, ids.size(), max_src);
    ids.resize(max_src);
  }
  return ids;
}

TranslationModel load_model(const std::string& path) {
  return model_from_safetensors(read_safetensors(path), path);
}

namespace {

/// The metadata of an anuvad model: format marker and version, the config (checked), and the
/// text normalization. Throws ModelFileError naming the file and key.
ModelConfig read_model_metadata(const SafetensorsFile& f, const std::string& path,
                                TextNormalization* normalization) {
  auto meta = [&](const std::string& key) -> const std::string& {
    const auto it = f.metadata.find(key);
    if (it == f.metadata.end())
      throw ModelFileError(path + ": not an anuvad model (metadata \"" + key + "\" missing)");
    return it->second;
  };
  if (meta("format") != kFormat) throw ModelFileError(path + ": not an anuvad model (format is \"" + meta("format") + "\")");
  if (meta("format_version") != kFormatVersion)
    throw ModelFileError(path + ": unsupported format_version " + meta("format_version") +
                         " (this anuvad reads version " + kFormatVersion + ")");
  nlohmann::json cfg_json;
  try {
    cfg_json = nlohmann::json::parse(meta("config"));
  } catch (const nlohmann::json::exception&) {
    throw ModelFileError(path + ": metadata \"config\" is not valid JSON");
  }
  ModelConfig cfg;
  try {
    cfg = ModelConfig::from_json(cfg_json, path + ": metadata config");
  } catch (const ConfigError& e) {
    throw ModelFileError(e.what());
  }
  const auto norm = f.metadata.find(kNormalizationKey);
  try {
    *normalization = norm == f.metadata.end() ? TextNormalization::kIdentity
                                              : normalization_from_name(norm->second);
  } catch (const ConfigError& e) {
    throw ModelFileError(path + ": metadata \"" + kNormalizationKey + "\": " + e.what());
  }
  return cfg;
}

/// Copies stored tensor `t` (F32 or F64, the parameter's shape, finite) into parameter `p`.
void load_parameter(const RawTensor& t, Param& p, const std::string& path) {
  if (t.shape != p.shape)
    throw ModelFileError(path + ": tensor " + p.name + " has shape " + shape_str(t.shape) +
                         ", config expects " + shape_str(p.shape));
  if (t.dtype != "F32" && t.dtype != "F64")
    throw ModelFileError(path + ": tensor " + p.name + " has dtype " + t.dtype + ", expected F32");
  for (Index i = 0; i < p.value.size(); ++i) {
    double v;
    if (t.dtype == "F32") {
      float x;
      std::memcpy(&x, &t.bytes[size_t(i) * 4], 4);
      v = x;
    } else {
      std::memcpy(&v, &t.bytes[size_t(i) * 8], 8);
    }
    if (!std::isfinite(v))
      throw ModelFileError(path + ": tensor " + p.name + " holds a NaN or Inf");
    p.value.data()[i] = static_cast<Scalar>(v);
  }
}

/// Both tokenizers from their U8 tensors, their vocabulary sizes checked against `cfg`.
void load_tokenizers(SafetensorsFile& f, const ModelConfig& cfg, const std::string& path,
                     TranslationModel& m) {
  for (const char* name : {"tokenizer.src", "tokenizer.tgt"}) {
    const auto it = f.tensors.find(name);
    if (it == f.tensors.end()) throw ModelFileError(path + ": tensor " + std::string(name) + " missing");
    if (it->second.dtype != "U8" || it->second.shape.size() != 1)
      throw ModelFileError(path + ": tensor " + std::string(name) + " must be a 1-D U8 tensor");
  }
  try {
    m.src_tokenizer = std::make_unique<Tokenizer>(Tokenizer::from_serialized(f.tensors["tokenizer.src"].bytes));
    m.tgt_tokenizer = std::make_unique<Tokenizer>(Tokenizer::from_serialized(f.tensors["tokenizer.tgt"].bytes));
  } catch (const TokenizerError& e) {
    throw ModelFileError(path + ": " + e.what());
  }
  if (m.src_tokenizer->vocab_size() != cfg.src_vocab_size ||
      m.tgt_tokenizer->vocab_size() != cfg.tgt_vocab_size)
    throw ModelFileError(path + ": tokenizer vocabulary sizes do not match the config");
}

bool is_tokenizer_tensor(const std::string& name) {
  return name == "tokenizer.src" || name == "tokenizer.tgt";
}

}  // namespace

TranslationModel model_from_safetensors(SafetensorsFile f, const std::string& path,
                                        const std::string& ignored_prefix) {
  if (!ignored_prefix.empty())
    for (auto it = f.tensors.begin(); it != f.tensors.end();)
      it = it->first.rfind(ignored_prefix, 0) == 0 ? f.tensors.erase(it) : std::next(it);
  TranslationModel m;
  const ModelConfig cfg = read_model_metadata(f, path, &m.normalization);
  m.metadata = f.metadata;
  // Bound what a hostile config can make us allocate: at most the parameters stored in the file
  // plus 16M (64 MiB); the per-tensor checks below then name any missing or misshapen tensor.
  int64_t stored = 0;
  for (const auto& [name, t] : f.tensors)
    if (!is_tokenizer_tensor(name))
      stored += static_cast<int64_t>(t.bytes.size()) / std::max(dtype_size(t.dtype), 1);
  if (cfg.parameter_count() > stored + (int64_t(16) << 20))
    throw ModelFileError(path + ": config implies " + std::to_string(cfg.parameter_count()) +
                         " parameters but the file stores only " + std::to_string(stored));
  m.transformer = std::make_unique<Transformer>(cfg);
  for (Param& p : m.transformer->params().params()) {
    const auto it = f.tensors.find(p.name);
    if (it == f.tensors.end()) throw ModelFileError(path + ": tensor " + p.name + " missing");
    load_parameter(it->second, p, path);
  }
  load_tokenizers(f, cfg, path, m);
  for (const auto& [name, t] : f.tensors)
    if (!is_tokenizer_tensor(name) && m.transformer->params().find(name) == nullptr)
      throw ModelFileError(path + ": unexpected tensor " + name);
  return m;
}

}  // namespace anuvad
