// Progress of a training run: the live terminal line (stderr, when it is a terminal and not
// --quiet) after every update and a log line every --disp-freq updates, with tokens per second
// and the estimated time to the planned end.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

namespace anuvad {

/// Planned updates of a run, for the ETA: batches_per_epoch · after_epochs (when > 0), capped
/// by after_steps (when > 0); INT64_MAX when neither limits the run.
int64_t planned_steps(int64_t batches_per_epoch, int after_epochs, int64_t after_steps);

/// Seconds still to go when `step` of `planned` updates took `elapsed` seconds, at the mean
/// rate so far: elapsed / step · (planned − step); −1 (unknown) when planned is INT64_MAX.
double eta_seconds(double elapsed, int64_t step, int64_t planned);

/// "m:ss" below an hour, "h:mm:ss" from an hour on (rounded to the second); "--:--" for a
/// negative or non-finite number of seconds.
std::string format_hms(double seconds);

/// format_hms(seconds), prefixed "≤ " when `at_most` (early stopping may end the run before
/// its planned updates, so the ETA is then a bound); "--:--" alone when unknown.
std::string format_eta(double seconds, bool at_most);

/// Receives the events of the structured training log (docs/training-log.md), one JSON object
/// each.
using TrainingEventSink = std::function<void(const nlohmann::json& event)>;

/// The progress display of fit(): owns the run's clock (resumed runs continue their elapsed
/// time).
class ProgressReporter {
 public:
  /// `planned` from planned_steps(); `disp_freq` = log every N updates (0 = never); the live
  /// line only when !quiet and stderr is a terminal; `elapsed_before` = seconds of the run
  /// before a resume; `eta_at_most` = the run may stop early (early stopping on a validation
  /// set), so the ETA shows as a bound ("ETA ≤ 1:43:26").
  ProgressReporter(int64_t planned, int disp_freq, bool quiet, double elapsed_before = 0,
                   bool eta_at_most = false);
  /// Seconds since the start of the run (including elapsed_before).
  double elapsed_seconds() const;
  /// After update `step` (1-based) of `epoch`: the live line "epoch E | step S/P | loss L |
  /// lr R | T tok/s | elapsed | ETA", and when step is a multiple of disp_freq the log line
  /// "epoch E | step S | loss L | lr R | T tgt tok/s | elapsed X | ETA Y". `loss` is nats per
  /// target token, `tokens_total` the target tokens of the run so far.
  /// With an event sink (set_event_sink), each log line is also a "train" event.
  void report(int epoch, int64_t step, double loss, double lr, int64_t tokens_total) const;
  /// Where the "train" events of the log lines go (none by default).
  void set_event_sink(TrainingEventSink sink) { sink_ = std::move(sink); }
  /// Erases the live line (before another log line or at the end).
  void clear_line() const;

 private:
  using Clock = std::chrono::steady_clock;
  int64_t planned_;
  int disp_freq_;
  bool live_;
  bool eta_at_most_;
  Clock::time_point t0_;
  TrainingEventSink sink_;
};

}  // namespace anuvad
