// The training report (inspect/training_report.h): reading a training log (events in order, a
// write in progress skipped, every other fault an error naming the file and line), the page
// (the log embedded so that hostile strings cannot break out, nothing loaded from anywhere),
// atomic writes, and where `anuvad train` puts the page. The page in a browser:
// tests/browser/report_page_test.sh (ctest report.page).
#include <catch2/catch.hpp>
#include <utf8.h>

#include <string>
#include <vector>

#include "anuvad/core/error.h"
#include "anuvad/inspect/training_report.h"
#include "support/test_support.h"

using namespace anuvad;
using anuvad::test::read_file;
using anuvad::test::TempDir;
using anuvad::test::write_file;
using nlohmann::json;

namespace {

const std::string kStart =
    R"({"config":{"model":{"d_model":32},"preset":"tiny","training":{"seed":1}},"event":"start","resumed_from_step":0})";
const std::string kTrain =
    R"({"elapsed_s":0.5,"epoch":1,"event":"train","learning_rate":0.001,"loss":4.5,"step":1,"tgt_tokens":40,"tgt_tokens_per_s":80})";
const std::string kValid =
    R"({"best":{"chrf":3.5},"elapsed_s":0.7,"event":"valid","improved":["chrf"],"metrics":{"chrf":3.5},"step":1})";

/// The message read_training_log throws for a log of `text` (written to dir/log.jsonl).
std::string read_error(const TempDir& dir, const std::string& text) {
  const std::string path = dir.file("log.jsonl");
  write_file(path, text);
  try {
    read_training_log(path);
  } catch (const DataError& e) {
    return e.what();
  }
  return "(no error)";
}

/// The JSON text embedded in a page.
std::string embedded_json(const std::string& page) {
  const std::string open = "<script type=\"application/json\" id=\"report-data\">";
  const size_t a = page.find(open);
  REQUIRE(a != std::string::npos);
  CHECK(page.find(open, a + 1) == std::string::npos);
  const size_t b = page.find("</script>", a);
  REQUIRE(b != std::string::npos);
  return page.substr(a + open.size(), b - a - open.size());
}

}  // namespace

TEST_CASE("read_training_log: events in file order, a write in progress skipped", "[report]") {
  TempDir dir;
  const std::string path = dir.file("run.log.jsonl");
  write_file(path, kStart + "\n" + kTrain + "\n\n" + kValid + "\n" + R"({"event":"tra)");
  const std::vector<json> events = read_training_log(path);
  REQUIRE(events.size() == 3);  // the blank line and the unterminated last line are skipped
  CHECK(events[0]["event"] == "start");
  CHECK(events[1] == json::parse(kTrain));
  CHECK(events[2]["metrics"]["chrf"] == 3.5);
  // Unknown events and fields are kept; a NaN written as null is accepted.
  write_file(path, kStart + "\n" + R"({"event":"future","x":1})" + "\n" +
                       R"({"elapsed_s":1,"event":"train","learning_rate":0.001,"loss":null,"step":2,"tgt_tokens_per_s":null})" + "\n");
  CHECK(read_training_log(path).size() == 3);
}

TEST_CASE("read_training_log: a missing, empty or corrupt log is an error naming the file and line", "[report]") {
  TempDir dir;
  const std::string missing = dir.file("nope.jsonl");
  CHECK_THROWS_AS(read_training_log(missing), IoError);
  CHECK_THROWS_WITH(read_training_log(missing), Catch::StartsWith(missing + ": cannot open"));
  const std::string log = dir.file("log.jsonl");
  CHECK(read_error(dir, "") == log + ": no events (empty training log)");
  CHECK(read_error(dir, "\n  \n") == log + ": no events (empty training log)");
  CHECK(read_error(dir, R"({"event":"tra)") == log + ": no events (empty training log)");
  // A corrupt line in the middle, or a corrupt last line that was finished (newline), is an error.
  CHECK_THAT(read_error(dir, kStart + "\n{oops\n" + kTrain + "\n"),
             Catch::StartsWith(log + ":2: invalid JSON: parse error at line 1"));
  CHECK_THAT(read_error(dir, kStart + "\n" + kTrain + "\n{oops\n"), Catch::StartsWith(log + ":3: invalid JSON"));
  CHECK(read_error(dir, "[1, 2]\n") == log + ":1: not a training log event (an object with an \"event\" string)");
  CHECK(read_error(dir, R"({"event": 3})" "\n") == log + ":1: not a training log event (an object with an \"event\" string)");
  CHECK(read_error(dir, kStart + "\n" + R"({"event":"train","step":"2"})" + "\n") ==
        log + ":2: \"train\" event: \"step\" must be an integer");
  CHECK(read_error(dir, R"({"event":"start","resumed_from_step":0})" "\n") ==
        log + ":1: \"start\" event: \"config\" must be an object");
  CHECK(read_error(dir, R"({"event":"valid","step":4,"metrics":{"chrf":"high"}})" "\n") ==
        log + ":1: \"valid\" event: metric \"chrf\" must be a number or null");
  CHECK(read_error(dir, R"({"event":"error"})" "\n") == log + ":1: \"error\" event: \"message\" must be a string");
}

TEST_CASE("training report page: hostile strings stay inside the embedded JSON", "[report]") {
  json start = json::parse(kStart);
  start["config"]["preset"] = "</script><script>alert(1)</script><!--";
  start["config"]["training"]["train_sets"] = json::array({"bad \xc3( utf-8", "<SCRIPT>x</SCRIPT>"});
  const json error = {{"event", "error"}, {"message", "</script ><img src=x onerror=alert(2)>"}};
  const std::vector<json> events = {start, json::parse(kTrain), json::parse(kValid), error};
  const std::string page = render_training_report_html(events, "runs/</script>.log.jsonl");
  CHECK(utf8::is_valid(page.begin(), page.end()));
  const std::string embedded = embedded_json(page);
  CHECK(embedded.find('<') == std::string::npos);  // no "</script", "<!--" or "<script"
  const json doc = json::parse(embedded);
  CHECK(doc["log"] == "runs/</script>.log.jsonl");
  REQUIRE(doc["events"].size() == 4);
  CHECK(doc["events"][0]["config"]["preset"] == "</script><script>alert(1)</script><!--");
  CHECK(doc["events"][0]["config"]["training"]["train_sets"][0] == "bad \xEF\xBF\xBD( utf-8");  // U+FFFD
  CHECK(doc["events"][3] == error);
  CHECK(page.find("</html>") != std::string::npos);
  CHECK(page.find("Content-Security-Policy") != std::string::npos);
  // Self-contained: nothing loaded from anywhere.
  for (const char* bad : {"<link", "@import", "src=\"", "src='", "fetch(", "XMLHttpRequest", "https://", "url("})
    CHECK(page.find(bad) == std::string::npos);
  // Events the page could not draw are refused, naming the event.
  CHECK_THROWS_WITH(render_training_report_html({start, json{{"event", "train"}}}, "x"),
                    "event 2: \"train\" event: \"step\" must be an integer");
}

TEST_CASE("write_training_report_html: atomic, IoError naming the file", "[report]") {
  TempDir dir;
  const std::vector<json> events = {json::parse(kStart), json::parse(kTrain)};
  const std::string path = dir.file("run.report.html");
  write_file(path, "old contents");
  write_training_report_html(path, events, "run.log.jsonl");
  CHECK(read_file(path) == render_training_report_html(events, "run.log.jsonl"));
  CHECK(dir.entries() == std::vector<std::string>{"run.report.html"});  // no temporary file left
  const std::string nowhere = dir.file("no/such/dir/r.html");
  CHECK_THROWS_AS(write_training_report_html(nowhere, events, "x"), IoError);
  CHECK_THROWS_WITH(write_training_report_html(nowhere, events, "x"), Catch::StartsWith(nowhere + ": "));
}

TEST_CASE("training_report_path: next to the log, without .jsonl and .log", "[report]") {
  CHECK(training_report_path("models/default.log.jsonl") == "models/default.report.html");
  CHECK(training_report_path("runs/a.jsonl") == "runs/a.report.html");
  CHECK(training_report_path("a.log") == "a.report.html");
  CHECK(training_report_path("/tmp/train-log") == "/tmp/train-log.report.html");
  CHECK(training_report_path("x/.jsonl") == "x/.jsonl.report.html");
}
