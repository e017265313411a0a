// `anuvad attention`: renders an attention dump (the JSON of `anuvad translate --attention`) as
// one self-contained HTML page (docs/attention.md).
#include <spdlog/spdlog.h>

#include <memory>
#include <string>

#include "anuvad/inspect/attention_dump.h"
#include "commands.h"

namespace anuvad::cli {

namespace {

struct AttentionOptions {
  std::string from;
  std::string html;
};

void run_attention(const AttentionOptions& o) {
  const nlohmann::json dump = read_attention_json(o.from);  // IoError / DataError naming the file
  write_attention_html(o.html, dump);
  spdlog::info("{}: {} sentence(s) → {}", o.from, dump["sentences"].size(), o.html);
}

}  // namespace

void setup_attention(CLI::App& app) {
  auto o = std::make_shared<AttentionOptions>();
  CLI::App* sub = app.add_subcommand(
      "attention", "Render an attention dump (anuvad translate --attention FILE.json) as a "
                   "self-contained HTML page: heatmaps, all layers × heads, head view");
  sub->add_option("--from", o->from, "Attention dump to read (JSON, schema anuvad-attention)")
      ->required();
  sub->add_option("--html", o->html, "HTML page to write")->required();
  sub->callback([o] { run_attention(*o); });
}

}  // namespace anuvad::cli
