// `anuvad report`: renders a structured training log (the JSON Lines of `anuvad train`) as one
// self-contained HTML page; and the observer through which `anuvad train` rewrites that page at
// every validation (docs/training-log.md "Report page").
#include <spdlog/spdlog.h>

#include <memory>
#include <string>

#include "anuvad/core/error.h"
#include "anuvad/inspect/training_report.h"
#include "commands.h"

namespace anuvad::cli {

namespace {

struct ReportOptions {
  std::string from;
  std::string html;
};

void run_report(const ReportOptions& o) {
  const auto events = read_training_log(o.from);  // IoError / DataError naming the file and line
  write_training_report_html(o.html, events, o.from);
  spdlog::info("{}: {} event(s) → {}", o.from, events.size(), o.html);
}

}  // namespace

std::function<void(const nlohmann::json&, const std::string&)> report_page_writer(
    std::string report_path) {
  auto warned = std::make_shared<bool>(false);
  return [report_path = std::move(report_path), warned](const nlohmann::json& event,
                                                        const std::string& log_path) {
    const std::string type = event.value("event", "");
    if (type != "valid" && type != "end" && type != "error") return;
    const std::string page = report_path.empty() ? training_report_path(log_path) : report_path;
    try {
      write_training_report_html(page, read_training_log(log_path), log_path);
    } catch (const std::exception& e) {  // a report must never stop training
      if (!*warned) spdlog::warn("training report not written (training goes on): {}", e.what());
      *warned = true;
    }
  };
}

void setup_report(CLI::App& app) {
  auto o = std::make_shared<ReportOptions>();
  CLI::App* sub = app.add_subcommand(
      "report", "Render a structured training log (anuvad train --log-json, by default "
                "<stem>.log.jsonl next to the model) as a self-contained HTML page: loss, dev "
                "cross-entropy, chrF and BLEU, learning rate, throughput, config");
  sub->add_option("--from", o->from, "Training log to read (JSON Lines, docs/training-log.md)")
      ->required();
  sub->add_option("--html", o->html, "HTML page to write")->required();
  sub->callback([o] { run_report(*o); });
}

}  // namespace anuvad::cli
