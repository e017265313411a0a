// Checkpoint averaging (include/anuvad/io/average.h).
#include "anuvad/io/average.h"

#include <nlohmann/json.hpp>

#include "anuvad/core/error.h"

namespace anuvad {

TranslationModel average_models(const std::vector<std::string>& paths) {
  if (paths.empty()) throw ConfigError("average: at least one model is needed");
  TranslationModel first = load_model(paths.front());
  const nlohmann::json config = first.transformer->config().to_json();
  auto& params = first.transformer->params().params();
  std::vector<Eigen::MatrixXd> sum;
  sum.reserve(params.size());
  for (const Param& p : params) sum.push_back(p.value.cast<double>());
  for (size_t k = 1; k < paths.size(); ++k) {
    const std::string& path = paths[k];
    const TranslationModel m = load_model(path);
    const nlohmann::json c = m.transformer->config().to_json();
    if (c != config)
      throw ConfigError(path + ": config differs from " + paths.front() + " (" + c.dump() +
                        " instead of " + config.dump() + "); only models of one run can be averaged");
    if (m.src_tokenizer->serialized() != first.src_tokenizer->serialized() ||
        m.tgt_tokenizer->serialized() != first.tgt_tokenizer->serialized())
      throw ConfigError(path + ": tokenizers differ from those of " + paths.front() +
                        "; only models of one run can be averaged");
    const auto& other = m.transformer->params().params();
    for (size_t i = 0; i < params.size(); ++i) sum[i] += other[i].value.cast<double>();
  }
  const double n = static_cast<double>(paths.size());
  for (size_t i = 0; i < params.size(); ++i) params[i].value = (sum[i] / n).cast<Scalar>();
  return first;
}

void average_model_files(const std::vector<std::string>& paths, const std::string& output) {
  const TranslationModel m = average_models(paths);
  const nlohmann::json sources = paths;
  save_model(output, *m.transformer, *m.src_tokenizer, *m.tgt_tokenizer,
             {{"averaged_from", sources.dump()}});
}

}  // namespace anuvad
