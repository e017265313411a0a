// The live progress line and the periodic log line of training.
#include "anuvad/train/progress.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace anuvad {

int64_t planned_steps(int64_t batches_per_epoch, int after_epochs, int64_t after_steps) {
  int64_t planned = after_epochs > 0 ? batches_per_epoch * after_epochs
                                     : std::numeric_limits<int64_t>::max();
  if (after_steps > 0) planned = std::min(planned, after_steps);
  return planned;
}

double eta_seconds(double elapsed, int64_t step, int64_t planned) {
  return planned == std::numeric_limits<int64_t>::max()
             ? -1
             : elapsed / step * static_cast<double>(planned - step);
}

std::string format_hms(double s) {
  if (!std::isfinite(s) || s < 0) return "--:--";
  const long v = static_cast<long>(s + 0.5);
  char buf[32];
  if (v >= 3600)
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", v / 3600, (v / 60) % 60, v % 60);
  else
    std::snprintf(buf, sizeof buf, "%ld:%02ld", v / 60, v % 60);
  return buf;
}

std::string format_eta(double seconds, bool at_most) {
  const std::string hms = format_hms(seconds);
  return at_most && hms != "--:--" ? "≤ " + hms : hms;
}

ProgressReporter::ProgressReporter(int64_t planned, int disp_freq, bool quiet, double elapsed_before,
                                   bool eta_at_most)
    : planned_(planned),
      disp_freq_(disp_freq),
      live_(!quiet && ::isatty(STDERR_FILENO)),
      eta_at_most_(eta_at_most),
      t0_(Clock::now() - std::chrono::duration_cast<Clock::duration>(
                             std::chrono::duration<double>(elapsed_before))) {}

double ProgressReporter::elapsed_seconds() const {
  return std::chrono::duration<double>(Clock::now() - t0_).count();
}

void ProgressReporter::report(int epoch, int64_t step, double loss, double lr, int64_t tokens_total) const {
  const double elapsed = elapsed_seconds();
  const double tps = tokens_total / std::max(elapsed, 1e-9);
  const double eta = eta_seconds(elapsed, step, planned_);
  if (live_)
    std::fprintf(stderr,
                 "\r\033[Kepoch %d | step %lld/%lld | loss %.4f | lr %.2e | %.0f tok/s | "
                 "elapsed %s | ETA %s",
                 epoch, static_cast<long long>(step), static_cast<long long>(planned_), loss, lr,
                 tps, format_hms(elapsed).c_str(), format_eta(eta, eta_at_most_).c_str());
  if (disp_freq_ > 0 && step % disp_freq_ == 0) {
    clear_line();
    spdlog::info("epoch {} | step {} | loss {:.4f} | lr {:.2e} | {:.0f} tgt tok/s | elapsed {} | ETA {}",
                 epoch, step, loss, lr, tps, format_hms(elapsed), format_eta(eta, eta_at_most_));
    if (sink_)
      sink_({{"event", "train"}, {"step", step}, {"epoch", epoch}, {"loss", loss},
             {"learning_rate", lr}, {"tgt_tokens", tokens_total}, {"tgt_tokens_per_s", tps},
             {"elapsed_s", elapsed}});
  }
}

void ProgressReporter::clear_line() const {
  if (live_) std::fprintf(stderr, "\r\033[K");
}

}  // namespace anuvad
