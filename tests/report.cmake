# Training report page tests (included by tests/CMakeLists.txt; docs/training-log.md "Report page").
#   training_report_test  Catch2: reading the log (a write in progress skipped, faults naming the
#                     file and line), hostile strings cannot break out of the page, atomic writes
#   report.page       the page in headless Chromium (tests/browser/report_page_test.sh) on the log
#                     of a tiny training with validation, interrupted and resumed: no script
#                     errors, chart points = log events, best chrF/BLEU/cross-entropy marked, the
#                     resume marked, config table; screenshots in ${CMAKE_BINARY_DIR}/report_page/
#                     (report.png is docs/report.png). SKIPPED (exit 77) without /usr/bin/chromium.
#   report.js_syntax  `node --check` on src/inspect/page/report.js; SKIPPED (exit 77) without node.
#   cli.report_*     `anuvad report`: errors are one line naming the file (and line), exit 1.
anuvad_add_test(training_report_test anuvad_core training_report_test.cpp)

add_test(NAME report.page
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/browser/report_page_test.sh $<TARGET_FILE:anuvad>
                 ${CMAKE_CURRENT_SOURCE_DIR}/data/cli/tiny.tsv ${CMAKE_CURRENT_SOURCE_DIR}/data/cli/tiny_config.json
                 ${CMAKE_BINARY_DIR}/report_page)
set_tests_properties(report.page PROPERTIES SKIP_RETURN_CODE 77 LABELS "report;browser" TIMEOUT 300)

if(ANUVAD_NODE)  # found by tests/attention.cmake
  add_test(NAME report.js_syntax COMMAND ${ANUVAD_NODE} --check ${PROJECT_SOURCE_DIR}/src/inspect/page/report.js)
else()
  add_test(NAME report.js_syntax COMMAND sh -c "echo 'node not found (Debian: nodejs)'; exit 77")
endif()
set_tests_properties(report.js_syntax PROPERTIES SKIP_RETURN_CODE 77 LABELS report TIMEOUT 30)

# anuvad_report_cli_test(NAME REGEX ARGS...): cli.report_NAME, `anuvad report ARGS...` through
# anuvad_cli_test (tests/cli.cmake: REGEX sees the merged output, then "anuvad exit status N end").
function(anuvad_report_cli_test name regex)
  anuvad_cli_test(report_${name} "${regex}" report ${ARGN})
  set_tests_properties(cli.report_${name} PROPERTIES LABELS "report;cli")
endfunction()
set(never ${CMAKE_BINARY_DIR}/report_never_written.html)
anuvad_report_cli_test(help "--from.*--html.*anuvad exit status 0 end" --help)
anuvad_report_cli_test(missing_file
  "^anuvad: error: /nonexistent\\.jsonl: cannot open[^\n]*\nanuvad exit status 1 end"
  --from /nonexistent.jsonl --html ${never})
anuvad_report_cli_test(empty_log
  "^anuvad: error: [^\n]*tests/data/report/empty\\.jsonl: no events \\(empty training log\\)\nanuvad exit status 1 end"
  --from ${CMAKE_CURRENT_SOURCE_DIR}/data/report/empty.jsonl --html ${never})
# tests/data/report/corrupt.jsonl: a start and a train event, a line cut short, a train event.
anuvad_report_cli_test(corrupt_line
  "^anuvad: error: [^\n]*tests/data/report/corrupt\\.jsonl:3: invalid JSON: parse error at line 1[^\n]*\nanuvad exit status 1 end"
  --from ${CMAKE_CURRENT_SOURCE_DIR}/data/report/corrupt.jsonl --html ${never})
anuvad_report_cli_test(not_a_log
  "^anuvad: error: [^\n]*tests/data/cli/tiny_config\\.json:1: invalid JSON[^\n]*\nanuvad exit status 1 end"
  --from ${CMAKE_CURRENT_SOURCE_DIR}/data/cli/tiny_config.json --html ${never})
anuvad_report_cli_test(unwritable_html
  "^anuvad: error: /nonexistent-dir/r\\.html: cannot create a temporary file[^\n]*\nanuvad exit status 1 end"
  --from ${CMAKE_CURRENT_SOURCE_DIR}/data/report/tiny.log.jsonl --html /nonexistent-dir/r.html)
# tests/data/report/tiny.log.jsonl: the log of a 4-update training of tests/data/cli/tiny.tsv
# validated every 2 updates (paths under the model's folder rewritten to models/).
anuvad_report_cli_test(tiny "tiny\\.log\\.jsonl: 8 event\\(s\\) → [^\n]*report_tiny\\.html\nanuvad exit status 0 end"
  --from ${CMAKE_CURRENT_SOURCE_DIR}/data/report/tiny.log.jsonl --html ${CMAKE_BINARY_DIR}/report_tiny.html)

# `anuvad train` writes the page next to its log at the end (and at every validation): the
# default <stem>.report.html, next to --log-json FILE, --report-html FILE, none with
# --no-report-html. (What is on the page: report.page.)
set(dir ${CMAKE_BINARY_DIR}/report_train)
add_test(NAME report.train_writes_page
  COMMAND sh -c [=[
set -e; anuvad=$0; dir=$1; shift
rm -rf "$dir"; mkdir -p "$dir"
"$anuvad" train "$@" -m "$dir/a.safetensors"
grep -q 'id="report-data">{"events":\[{' "$dir/a.report.html"
"$anuvad" train "$@" -m "$dir/b.safetensors" --log-json "$dir/b.jsonl" --no-valid
grep -q '"valid_sets":\[\]' "$dir/b.report.html"
"$anuvad" train "$@" -m "$dir/c.safetensors" --report-html "$dir/c.html"
test -s "$dir/c.html" && test ! -e "$dir/c.report.html"
"$anuvad" train "$@" -m "$dir/d.safetensors" --no-report-html
test -s "$dir/d.log.jsonl" && test ! -e "$dir/d.report.html"
echo "report pages written: a.report.html b.report.html (--log-json b.jsonl) c.html, none for --no-report-html"]=]
    $<TARGET_FILE:anuvad> ${dir} -t ${CMAKE_CURRENT_SOURCE_DIR}/data/cli/tiny.tsv
    --valid-sets ${CMAKE_CURRENT_SOURCE_DIR}/data/cli/tiny.tsv -c ${CMAKE_CURRENT_SOURCE_DIR}/data/cli/tiny_config.json
    --batch-tokens 60 --src-vocab-size 60 --tgt-vocab-size 80 --after-steps 3 --valid-freq 2 -q --cpu-threads 1 --no-resume)
set_tests_properties(report.train_writes_page PROPERTIES
  PASS_REGULAR_EXPRESSION "report pages written"
  LABELS "report;cli" TIMEOUT 60)
