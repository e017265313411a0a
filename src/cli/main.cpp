// anuvad: English→Hindi translation with a transformer written on Eigen.
// Maps every anuvad::Error to a one-line message on stderr and exit code 1.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <iostream>

#include "anuvad/core/distributed.h"
#include "anuvad/core/error.h"
#include "anuvad/core/runtime.h"
#include "build_info.h"
#include "commands.h"

int main(int argc, char** argv) {
  // Keep freed activation buffers in the heap instead of returning them to the kernel: every
  // training step and decoding call reallocates matrices of the same sizes, and fresh pages
  // cost a page fault each.
  anuvad::configure_allocator();
  anuvad::configure_threads(0);  // every core; commands with --cpu-threads set their own
  // Under mpirun: one rank of a data-parallel job (core/distributed.h); rank 0 alone logs.
  anuvad::DistributedSession mpi(&argc, &argv);
  auto logger = spdlog::stderr_color_mt("anuvad");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("[%H:%M:%S] %^%l%$ %v");
  if (!anuvad::is_root_rank()) spdlog::set_level(spdlog::level::err);

  CLI::App app{"anuvad: English→Hindi transformer translator (train, translate, score, evaluate, attention, average, report)",
               "anuvad"};
  app.set_version_flag("--version", std::function<std::string()>(anuvad::cli::version_text),
                       "Print the version, git revision and build features and exit");
  app.require_subcommand(1);
  anuvad::cli::setup_train(app);
  anuvad::cli::setup_translate(app);
  anuvad::cli::setup_score(app);
  anuvad::cli::setup_evaluate(app);
  anuvad::cli::setup_attention(app);
  anuvad::cli::setup_average(app);
  anuvad::cli::setup_report(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {  // anuvad::Error and the rest
    std::cerr << "anuvad: error: " << e.what() << std::endl;
    anuvad::abort_all_ranks(1);  // no other rank may wait forever in a collective
    return 1;
  }
  return anuvad::cli::exit_code();
}
