// `anuvad average -o OUT MODEL MODEL...`: element-wise mean of the weights of models that share
// their config and tokenizers (checkpoint averaging), written atomically with save_model.
#include <spdlog/spdlog.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "anuvad/core/error.h"
#include "anuvad/io/model_file.h"
#include "commands.h"

namespace anuvad::cli {

namespace {

struct AverageOptions {
  std::string output_path;
  std::vector<std::string> model_paths;
};

void run_average(const AverageOptions& o) {
  if (o.model_paths.empty()) throw ConfigError("average: at least one model is needed");
  TranslationModel first = load_model(o.model_paths.front());
  const nlohmann::json config = first.transformer->config().to_json();
  auto& params = first.transformer->params().params();
  // Sum in double, so the mean does not depend on rounding of partial float sums.
  std::vector<Eigen::MatrixXd> sum;
  sum.reserve(params.size());
  for (const Param& p : params) sum.push_back(p.value.cast<double>());
  for (size_t k = 1; k < o.model_paths.size(); ++k) {
    const std::string& path = o.model_paths[k];
    const TranslationModel m = load_model(path);
    const nlohmann::json c = m.transformer->config().to_json();
    if (c != config)
      throw ConfigError(path + ": config differs from " + o.model_paths.front() + " (" + c.dump() +
                        " instead of " + config.dump() + "); only models of one run can be averaged");
    if (m.src_tokenizer->serialized() != first.src_tokenizer->serialized() ||
        m.tgt_tokenizer->serialized() != first.tgt_tokenizer->serialized())
      throw ConfigError(path + ": tokenizers differ from those of " + o.model_paths.front() +
                        "; only models of one run can be averaged");
    const auto& other = m.transformer->params().params();
    for (size_t i = 0; i < params.size(); ++i) sum[i] += other[i].value.cast<double>();
  }
  const double n = static_cast<double>(o.model_paths.size());
  for (size_t i = 0; i < params.size(); ++i) params[i].value = (sum[i] / n).cast<Scalar>();
  nlohmann::json sources = o.model_paths;
  save_model(o.output_path, *first.transformer, *first.src_tokenizer, *first.tgt_tokenizer,
             {{"averaged_from", sources.dump()}});
  spdlog::info("averaged {} models into {}", o.model_paths.size(), o.output_path);
}

}  // namespace

void setup_average(CLI::App& app) {
  auto opts = std::make_shared<AverageOptions>();
  CLI::App* sub = app.add_subcommand(
      "average", "Average the weights of models with the same config and tokenizers (e.g. the "
                 "best and final models, or checkpoints of one run) into a new model file");
  sub->add_option("-o,--output", opts->output_path, "Model file to write")->required();
  sub->add_option("models", opts->model_paths, "Model files to average")->required()->expected(1, -1);
  sub->callback([opts] { run_average(*opts); });
}

}  // namespace anuvad::cli
