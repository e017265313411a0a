// `anuvad average -o OUT MODEL MODEL...`: element-wise mean of the weights of models that share
// their config and tokenizers (checkpoint averaging, anuvad/io/average.h).
#include <spdlog/spdlog.h>

#include <memory>
#include <string>
#include <vector>

#include "anuvad/io/average.h"
#include "commands.h"

namespace anuvad::cli {

namespace {

struct AverageOptions {
  std::string output_path;
  std::vector<std::string> model_paths;
};

void run_average(const AverageOptions& o) {
  average_model_files(o.model_paths, o.output_path);
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
