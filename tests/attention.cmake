# Attention dump and viewer tests (included by tests/CMakeLists.txt).
#   attention_test    Catch2: the JSON document (shapes, row sums, causality, hostile text), its
#                     validation against docs/attention-schema.json with valijson
#                     (Debian: libvalijson-dev), read errors, atomic writes
#   beam_trace_test   Catch2: the beam trace (translate --beam-trace) changes no result, agrees
#                     with the n-best list and the word scores, validates against
#                     docs/beam-trace-schema.json
#   attention.page    the page in headless Chromium (tests/browser/attention_page_test.sh): no
#                     script errors, T×S heatmap cells, layers × heads panels, a scripted
#                     click-through; the decoding view (greedy and beam 4) on translations of
#                     the model attention.decoding_model trains; screenshots in
#                     ${CMAKE_BINARY_DIR}/attention_page/.
#                     SKIPPED (exit 77) when /usr/bin/chromium is absent (Debian: chromium).
#   attention.js_syntax  `node --check` on the page's scripts (src/inspect/page/{attention,decoding}.js), so a
#                     syntax error fails without a browser; SKIPPED (exit 77) without node (Debian: nodejs).
anuvad_add_test(attention_test anuvad_core attention_test.cpp)
anuvad_add_test(beam_trace_test anuvad_core beam_trace_test.cpp)
find_package(valijson QUIET)
if(valijson_FOUND)
  foreach(t attention_test beam_trace_test)
    target_link_libraries(${t} PRIVATE valijson)
    target_compile_definitions(${t} PRIVATE ANUVAD_HAVE_VALIJSON)
  endforeach()
else()
  message(WARNING "valijson not found (Debian: libvalijson-dev): the attention schema test will fail")
endif()

# Writes a dump of a small random model and prints its sizes (also used to time big pages).
add_executable(attention_fixture tools/attention_fixture.cpp)
target_link_libraries(attention_fixture PRIVATE anuvad_core anuvad_warnings)
target_include_directories(attention_fixture PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})

# A small model that translates tests/data/cli/tiny.tsv correctly (about 6 s), for the decoding
# view on real translations and its screenshots (docs/decoding-greedy.png, decoding-beam4.png).
set(ANUVAD_DECODING_MODEL ${CMAKE_BINARY_DIR}/attention_decoding.safetensors)
add_test(NAME attention.decoding_model
         COMMAND sh -c [=[rm -f "$1" && "$0" train --train-sets "$2" --config "$3" --after-epochs 150 --warmup-steps 20 -l 0.005 --no-valid --no-resume --seed 1 --src-vocab-size 60 --tgt-vocab-size 80 -q -m "$1" && test -s "$1"]=]
                 $<TARGET_FILE:anuvad> ${ANUVAD_DECODING_MODEL} ${CMAKE_CURRENT_SOURCE_DIR}/data/cli/tiny.tsv
                 ${CMAKE_CURRENT_SOURCE_DIR}/data/cli/tiny_config.json)
set_tests_properties(attention.decoding_model PROPERTIES
  FIXTURES_SETUP attention_decoding_model LABELS attention TIMEOUT 120)

add_test(NAME attention.page
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/browser/attention_page_test.sh
                 $<TARGET_FILE:attention_fixture> $<TARGET_FILE:anuvad>
                 ${CMAKE_BINARY_DIR}/attention_page ${ANUVAD_DECODING_MODEL})
set_tests_properties(attention.page PROPERTIES
  SKIP_RETURN_CODE 77
  FIXTURES_REQUIRED attention_decoding_model
  LABELS "attention;browser"
  TIMEOUT 300)

find_program(ANUVAD_NODE node)
if(ANUVAD_NODE)
  add_test(NAME attention.js_syntax COMMAND sh -c [=["$0" --check "$1" && "$0" --check "$2"]=] ${ANUVAD_NODE}
           ${PROJECT_SOURCE_DIR}/src/inspect/page/attention.js ${PROJECT_SOURCE_DIR}/src/inspect/page/decoding.js)
else()
  add_test(NAME attention.js_syntax COMMAND sh -c "echo 'node not found (Debian: nodejs)'; exit 77")
endif()
set_tests_properties(attention.js_syntax PROPERTIES SKIP_RETURN_CODE 77 LABELS attention TIMEOUT 30)

# `anuvad attention`: errors are one line naming the file, exit status 1. The wrapper prints "anuvad exit status N end" after the merged output.
set(ANUVAD_ATTENTION_RUN [=["$0" "$@" 2>&1; echo "anuvad exit status $? end"]=])
function(anuvad_attention_cli_test name regex)
  add_test(NAME attention.cli_${name}
           COMMAND sh -c "${ANUVAD_ATTENTION_RUN}" $<TARGET_FILE:anuvad> attention ${ARGN}
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(attention.cli_${name} PROPERTIES
    PASS_REGULAR_EXPRESSION "${regex}"
    FAIL_REGULAR_EXPRESSION "terminate called|Segmentation fault|Aborted|core dumped"
    LABELS "attention;cli"
    TIMEOUT 20)
endfunction()
anuvad_attention_cli_test(help "--from.*--html.*anuvad exit status 0 end" --help)
anuvad_attention_cli_test(missing_file
  "^anuvad: error: /nonexistent\\.json: cannot open[^\n]*\nanuvad exit status 1 end"
  --from /nonexistent.json --html ${CMAKE_BINARY_DIR}/attention_never_written.html)
anuvad_attention_cli_test(invalid_json
  "^anuvad: error: [^\n]*tests/data/cli/tiny\\.tsv: invalid JSON: parse error at line 1[^\n]*\nanuvad exit status 1 end"
  --from ${CMAKE_CURRENT_SOURCE_DIR}/data/cli/tiny.tsv --html ${CMAKE_BINARY_DIR}/attention_never_written.html)
anuvad_attention_cli_test(wrong_schema
  "^anuvad: error: [^\n]*tiny_config\\.json: not an anuvad attention dump[^\n]*\nanuvad exit status 1 end"
  --from ${CMAKE_CURRENT_SOURCE_DIR}/data/cli/tiny_config.json --html ${CMAKE_BINARY_DIR}/attention_never_written.html)
anuvad_attention_cli_test(unwritable_html
  "^anuvad: error: /nonexistent-dir/a\\.html: cannot create a temporary file[^\n]*\nanuvad exit status 1 end"
  --from ${CMAKE_CURRENT_SOURCE_DIR}/data/attention/tiny_dump.json --html /nonexistent-dir/a.html)
# tests/data/attention/tiny_dump.json: written by `attention_fixture FILE --layers-enc 1
# --layers-dec 1 --heads 2 --d-model 8 --src 2 --tgt 3` (3 sentences, the last one empty).
anuvad_attention_cli_test(tiny "tiny_dump\\.json: 3 sentence\\(s\\) → [^\n]*attention_tiny\\.html\nanuvad exit status 0 end"
  --from ${CMAKE_CURRENT_SOURCE_DIR}/data/attention/tiny_dump.json --html ${CMAKE_BINARY_DIR}/attention_tiny.html)

# `translate --beam-trace` to a file that cannot be written: one line naming it, exit status 1.
add_test(NAME attention.cli_beam_trace_unwritable
         COMMAND sh -c "${ANUVAD_ATTENTION_RUN}" $<TARGET_FILE:anuvad> translate -m ${CMAKE_BINARY_DIR}/cli_tiny.safetensors
                 --beam-trace /nonexistent-dir/t.json hello)
set_tests_properties(attention.cli_beam_trace_unwritable PROPERTIES
  PASS_REGULAR_EXPRESSION "anuvad: error: /nonexistent-dir/t\\.json: cannot create a temporary file[^\n]*\nanuvad exit status 1 end"
  FAIL_REGULAR_EXPRESSION "terminate called|Segmentation fault|Aborted|core dumped"
  FIXTURES_REQUIRED cli_tiny_model
  LABELS "attention;cli"
  TIMEOUT 20)
