# CTest tests of the anuvad executable (included by tests/CMakeLists.txt), label "cli".
# Inputs are small committed files under tests/data/cli/; the only file written is the tiny
# model ${CMAKE_BINARY_DIR}/cli_tiny.safetensors (fixture cli_tiny_model).
#
# Most tests run anuvad through `sh -c` so that one PASS_REGULAR_EXPRESSION can check both the
# message and the exit status: the wrapper prints "anuvad exit status N end" after the output
# (stderr merged into stdout, so the order is deterministic).

set(ANUVAD_CLI_DATA ${CMAKE_CURRENT_SOURCE_DIR}/data/cli)
set(ANUVAD_CLI_MODEL ${CMAKE_BINARY_DIR}/cli_tiny.safetensors)
# Reported whatever the regexes say: a crash, an uncaught exception or a sanitizer report.
set(ANUVAD_CLI_CRASH "terminate called|Segmentation fault|Aborted|core dumped|AddressSanitizer|runtime error:")
set(ANUVAD_CLI_RUN [=["$0" "$@" 2>&1; echo "anuvad exit status $? end"]=])

# anuvad_cli_test(NAME REGEX ARGS...): runs `anuvad ARGS...` from the repository root; passes
# when the output matches REGEX (use "anuvad exit status N end" in it to pin the status).
function(anuvad_cli_test name regex)
  add_test(NAME cli.${name}
           COMMAND sh -c "${ANUVAD_CLI_RUN}" $<TARGET_FILE:anuvad> ${ARGN}
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(cli.${name} PROPERTIES
    PASS_REGULAR_EXPRESSION "${regex}"
    FAIL_REGULAR_EXPRESSION "${ANUVAD_CLI_CRASH}"
    LABELS cli
    TIMEOUT 20)
endfunction()

# --- Command line -----------------------------------------------------------------------------

# No subcommand: CLI11 reports it and exits non-zero (but not with a signal).
anuvad_cli_test(no_subcommand "[Ss]ubcommand.*anuvad exit status ([1-9]|[1-9][0-9]|1[01][0-9]|12[0-7]) end")

# `train --help` lists every option the README documents, and exits 0.
foreach(option --train-sets --valid-sets --model --config --seed --cpu-threads --after-epochs)
  anuvad_cli_test(train_help${option} "[ ,]${option}[ =].*anuvad exit status 0 end" train --help)
endforeach()

# OPENBLAS_CORETYPE forcing a kernel is named in --version (and warned about by `train`); without
# it OpenBLAS's own choice is not called forced. The variable is read when OpenBLAS loads.
add_test(NAME cli.version_names_forced_openblas_core
         COMMAND sh -c [=[OPENBLAS_CORETYPE=Haswell "$0" --version | grep 'core Haswell, forced by OPENBLAS_CORETYPE)' && env -u OPENBLAS_CORETYPE "$0" --version | grep '^BLAS: ' | grep -v forced]=]
                 $<TARGET_FILE:anuvad>)
set_tests_properties(cli.version_names_forced_openblas_core PROPERTIES LABELS cli TIMEOUT 20)

# An unknown option is a usage error, not a crash.
anuvad_cli_test(unknown_option "--no-such-option.*anuvad exit status [1-9][0-9]* end"
                translate --no-such-option)

# --- Model files ------------------------------------------------------------------------------

anuvad_cli_test(translate_missing_model
                "anuvad: error: /nonexistent\\.safetensors: [^\n]*\nanuvad exit status 1 end"
                translate -m /nonexistent.safetensors hello)
anuvad_cli_test(translate_text_file_as_model
                "anuvad: error: [^\n]*tests/data/cli/tiny\\.tsv: not a safetensors file[^\n]*\nanuvad exit status 1 end"
                translate -m ${ANUVAD_CLI_DATA}/tiny.tsv hello)
anuvad_cli_test(score_missing_model "/nonexistent\\.safetensors.*anuvad exit status 1 end"
                score -m /nonexistent.safetensors)

# --- Training input errors (fail before any training) -----------------------------------------

anuvad_cli_test(train_no_tab
                "anuvad: error: [^\n]*bad_no_tab\\.tsv:3: no tab[^\n]*\nanuvad exit status 1 end"
                train --train-sets ${ANUVAD_CLI_DATA}/bad_no_tab.tsv --no-valid
                -m ${CMAKE_BINARY_DIR}/cli_never_written.safetensors)
anuvad_cli_test(train_bad_utf8
                "anuvad: error: [^\n]*bad_utf8\\.tsv:3: invalid UTF-8[^\n]*\nanuvad exit status 1 end"
                train --train-sets ${ANUVAD_CLI_DATA}/bad_utf8.tsv --no-valid
                -m ${CMAKE_BINARY_DIR}/cli_never_written.safetensors)
anuvad_cli_test(train_bad_valid_set
                "anuvad: error: [^\n]*bad_no_tab\\.tsv:3[^\n]*\nanuvad exit status 1 end"
                train --train-sets ${ANUVAD_CLI_DATA}/tiny.tsv --valid-sets ${ANUVAD_CLI_DATA}/bad_no_tab.tsv
                -m ${CMAKE_BINARY_DIR}/cli_never_written.safetensors)
anuvad_cli_test(train_missing_corpus
                "anuvad: error: [^\n]*no_such_corpus\\.tsv[^\n]*\nanuvad exit status 1 end"
                train --train-sets ${ANUVAD_CLI_DATA}/no_such_corpus.tsv --no-valid
                -m ${CMAKE_BINARY_DIR}/cli_never_written.safetensors)
# A vocabulary smaller than the characters of its text: one line naming the flag and the size
# that works, exit 1, no model written.
add_test(NAME cli.train_vocabulary_too_small
         COMMAND sh -c [=[rm -f "$1"; "$0" train --train-sets "$2" --no-valid --tgt-vocab-size 20 -q -m "$1" 2>&1; echo "anuvad exit status $? end"; test -e "$1" && echo "model written" || echo "no model"]=]
                 $<TARGET_FILE:anuvad> ${CMAKE_BINARY_DIR}/cli_vocab_too_small.safetensors ${ANUVAD_CLI_DATA}/tiny.tsv
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(cli.train_vocabulary_too_small PROPERTIES
  PASS_REGULAR_EXPRESSION "anuvad: error: target vocabulary \\(--tgt-vocab-size\\) of 20 pieces is too small for the [0-9]+ distinct characters of its text \\(each needs a piece, as do the word boundary ▁ and 4 specials\\): use at least [0-9]+\nanuvad exit status 1 end\nno model\n$"
  FAIL_REGULAR_EXPRESSION "${ANUVAD_CLI_CRASH}"
  LABELS cli
  TIMEOUT 20)

# --- End to end: train a tiny model, then use it ----------------------------------------------

# Removes any model left by an earlier run first, so the tests below never see a stale file.
add_test(NAME cli.train_tiny
         COMMAND sh -c [=[rm -f "$1" && "$0" train --train-sets "$2" --config "$3" --after-epochs 2 --no-valid --seed 1 --src-vocab-size 60 --tgt-vocab-size 80 -q -m "$1" && test -s "$1"]=]
                 $<TARGET_FILE:anuvad> ${ANUVAD_CLI_MODEL} ${ANUVAD_CLI_DATA}/tiny.tsv ${ANUVAD_CLI_DATA}/tiny_config.json
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(cli.train_tiny PROPERTIES
  FIXTURES_SETUP cli_tiny_model
  FAIL_REGULAR_EXPRESSION "${ANUVAD_CLI_CRASH}"
  LABELS cli
  TIMEOUT 20)

function(anuvad_cli_model_test name regex)
  anuvad_cli_test(${name} "${regex}" ${ARGN})
  set_tests_properties(cli.${name} PROPERTIES FIXTURES_REQUIRED cli_tiny_model)
endfunction()

# Translating an argument succeeds (the words of a 2-epoch model are not checked).
anuvad_cli_model_test(translate_tiny "anuvad exit status 0 end" translate -m ${ANUVAD_CLI_MODEL} hello)
# --word-scores appends one non-positive log-probability per output token.
anuvad_cli_model_test(translate_tiny_word_scores
                      "\\|\\|\\| WordScores= -?[0-9]+\\.[0-9]+.*anuvad exit status 0 end"
                      translate -m ${ANUVAD_CLI_MODEL} --word-scores --max-length 5 hello)

# --compute-type bfloat16 (and int8) translates and scores; an unknown value is a one-line error before any
# model is read; translate, score and evaluate document the flag.
anuvad_cli_model_test(translate_tiny_bfloat16 "anuvad exit status 0 end"
                      translate -m ${ANUVAD_CLI_MODEL} --compute-type bfloat16 hello)
anuvad_cli_model_test(translate_tiny_int8 "anuvad exit status 0 end"
                      translate -m ${ANUVAD_CLI_MODEL} --compute-type int8 hello)
add_test(NAME cli.score_tiny_bfloat16
         COMMAND sh -c [=[printf 'hello\tनमस्ते\n' | "$0" score -m "$1" --compute-type bfloat16]=]
                 $<TARGET_FILE:anuvad> ${ANUVAD_CLI_MODEL}
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(cli.score_tiny_bfloat16 PROPERTIES
  FIXTURES_REQUIRED cli_tiny_model
  PASS_REGULAR_EXPRESSION "^-[0-9]+\\.[0-9]+\n$"
  LABELS cli
  TIMEOUT 20)
anuvad_cli_test(translate_bad_compute_type
  "^anuvad: error: --compute-type: compute type 'bf17' is not auto, float32, bfloat16 or int8\nanuvad exit status 1 end"
  translate --compute-type bf17 hello)
# The default, --compute-type auto, is float32 for a model as small as the CLI fixture (below
# kBf16AutoMinWeightBytes) in every build, and evaluate's JSON records that resolved type; an
# explicit bfloat16 or int8 is recorded as such; --version states the rule of this build.
add_test(NAME cli.compute_type_auto
         COMMAND sh -c [=["$0" --version | grep '^decoding: --compute-type auto = ' && got=$("$0" evaluate -m "$1" --test "$2" --json --cpu-threads 1 2>/dev/null | sed 's/.*"compute_type":"\([a-z0-9]*\)".*/\1/') && bf=$("$0" evaluate -m "$1" --test "$2" --json --compute-type bfloat16 --cpu-threads 1 2>/dev/null | sed 's/.*"compute_type":"\([a-z0-9]*\)".*/\1/') && i8=$("$0" evaluate -m "$1" --test "$2" --json --compute-type int8 --cpu-threads 1 2>/dev/null | sed 's/.*"compute_type":"\([a-z0-9]*\)".*/\1/') && echo "small model: auto = $got, bfloat16 = $bf, int8 = $i8"]=]
                 $<TARGET_FILE:anuvad> ${ANUVAD_CLI_MODEL} ${ANUVAD_CLI_DATA}/tiny.tsv
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(cli.compute_type_auto PROPERTIES
  FIXTURES_REQUIRED cli_tiny_model
  PASS_REGULAR_EXPRESSION "^decoding: --compute-type auto = (bfloat16 for models of at least 8 MiB of weight matrices, float32 below \\(bfloat16 kernel [a-z0-9+]+\\)|float32 \\(this build's bfloat16 kernel is scalar\\)); --compute-type int8 kernel [a-z0-9]+\nsmall model: auto = float32, bfloat16 = bfloat16, int8 = int8\n$"
  LABELS cli
  TIMEOUT 30)
foreach(command translate score evaluate)
  anuvad_cli_test(${command}_help_compute_type "--compute-type[^\n]*bfloat16.*anuvad exit status 0 end" ${command} --help)
endforeach()

# `score` prints a negative total log-probability for a src<TAB>tgt line.
add_test(NAME cli.score_tiny
         COMMAND sh -c [=[printf 'hello\tनमस्ते\n' | "$0" score -m "$1"]=]
                 $<TARGET_FILE:anuvad> ${ANUVAD_CLI_MODEL}
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(cli.score_tiny PROPERTIES
  FIXTURES_REQUIRED cli_tiny_model
  PASS_REGULAR_EXPRESSION "^-[0-9]+\\.[0-9]+\n$"
  LABELS cli
  TIMEOUT 20)

# `score` of a line without a tab: an empty output line, an error naming <stdin>:2, exit 1,
# and the other lines still scored.
add_test(NAME cli.score_tiny_bad_line
         COMMAND sh -c [=[printf 'hello\tनमस्ते\nno tab here\nhello\tनमस्ते\n' | "$0" score -m "$1" 2>&1; echo "anuvad exit status $? end"]=]
                 $<TARGET_FILE:anuvad> ${ANUVAD_CLI_MODEL}
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(cli.score_tiny_bad_line PROPERTIES
  FIXTURES_REQUIRED cli_tiny_model
  PASS_REGULAR_EXPRESSION "<stdin>:2: no tab.*anuvad exit status 1 end"
  FAIL_REGULAR_EXPRESSION "${ANUVAD_CLI_CRASH}"
  LABELS cli
  TIMEOUT 20)

# An empty line on stdin translates to an empty line (exactly one byte, "\n"), exit 0.
add_test(NAME cli.translate_tiny_empty_line
         COMMAND sh -c [=[printf '\n' | "$0" translate -m "$1" > "$2" && od -An -tx1 "$2" | tr -d ' \n' && echo " bytes"]=]
                 $<TARGET_FILE:anuvad> ${ANUVAD_CLI_MODEL} ${CMAKE_BINARY_DIR}/cli_empty_line.out
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(cli.translate_tiny_empty_line PROPERTIES
  FIXTURES_REQUIRED cli_tiny_model
  PASS_REGULAR_EXPRESSION "^0a bytes\n$"
  LABELS cli
  TIMEOUT 20)

# Lines on stdin give one output line each, the empty one in its place.
add_test(NAME cli.translate_tiny_stdin_lines
         COMMAND sh -c [=[printf 'hello\n\nThank you.\n' | "$0" translate -m "$1" --max-length 5 | awk 'END { print NR " lines" } NR == 2 { print "line 2 [" $0 "]" }']=]
                 $<TARGET_FILE:anuvad> ${ANUVAD_CLI_MODEL}
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(cli.translate_tiny_stdin_lines PROPERTIES
  FIXTURES_REQUIRED cli_tiny_model
  PASS_REGULAR_EXPRESSION "^line 2 \\[\\]\n3 lines\n$"
  LABELS cli
  TIMEOUT 20)

# --- evaluate: translate a test corpus and score it (BLEU, chrF2, chrF2++, exact match) -------

foreach(option --test --beam-size --normalize --json --tokenize --mini-batch)
  anuvad_cli_test(evaluate_help${option} "[ ,]${option}[ =].*anuvad exit status 0 end" evaluate --help)
endforeach()

# Text output: the four metrics with their signatures and the sentence count.
anuvad_cli_model_test(evaluate_tiny
  "BLEU = [0-9]+\\.[0-9][0-9] [0-9.]+/[0-9.]+/[0-9.]+/[0-9.]+ \\(BP = [0-9.]+ ratio = [0-9.]+ hyp_len = [0-9]+ ref_len = [0-9]+\\)  nrefs:1\\|case:mixed\\|eff:no\\|tok:13a\\+danda\\|smooth:exp\\|version:anuvad-1\nchrF2 = [0-9]+\\.[0-9][0-9]  nrefs:1\\|case:mixed\\|eff:yes\\|nc:6\\|nw:0\\|space:no\\|version:anuvad-1\nchrF2\\+\\+ = [0-9]+\\.[0-9][0-9]  nrefs:1\\|case:mixed\\|eff:yes\\|nc:6\\|nw:2\\|space:no\\|version:anuvad-1\nexact match = [0-9]+\\.[0-9][0-9] % \\([0-9]+ of 20\\)\nsentences = 20\nanuvad exit status 0 end"
  evaluate -m ${ANUVAD_CLI_MODEL} --test ${ANUVAD_CLI_DATA}/tiny.tsv --cpu-threads 1)

# --json: one JSON object on stdout (stderr kept apart), with the beam size used.
add_test(NAME cli.evaluate_tiny_json
         COMMAND sh -c [=["$0" evaluate -m "$1" --test "$2" --json -b 3 -n 0.6 --tokenize 13a --max-length 12 --cpu-threads 1 --compute-type float32 2>/dev/null]=]
                 $<TARGET_FILE:anuvad> ${ANUVAD_CLI_MODEL} ${ANUVAD_CLI_DATA}/tiny.tsv
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(cli.evaluate_tiny_json PROPERTIES
  FIXTURES_REQUIRED cli_tiny_model
  PASS_REGULAR_EXPRESSION "^\\{\"beam_size\":3,\"bleu\":\\{[^\n]*\"signature\":\"nrefs:1\\|case:mixed\\|eff:no\\|tok:13a\\|smooth:exp\\|version:anuvad-1\"[^\n]*\"chrf\":\\{\"score\":[-0-9.e]+,\"signature\":\"[^\"]*nw:0[^\"]*\"\\},\"chrf\\+\\+\":\\{\"score\":[-0-9.e]+,\"signature\":\"[^\"]*nw:2[^\"]*\"\\},\"compute_type\":\"float32\",\"exact_match\":\\{\"count\":[0-9]+,\"percent\":[-0-9.e]+\\}[^\n]*\"sentences\":20,[^\n]*\\}\n$"
  FAIL_REGULAR_EXPRESSION "${ANUVAD_CLI_CRASH}"
  LABELS cli
  TIMEOUT 20)

# An .en/.hi pair scores exactly as the TSV it was cut from; -o writes one translation per line.
add_test(NAME cli.evaluate_tiny_en_hi_pair
         COMMAND sh -c [=[cut -f1 "$2" > "$3.en" && cut -f2 "$2" > "$3.hi" && "$0" evaluate -m "$1" --test "$2" -o "$3.out" --cpu-threads 1 > "$3.tsv.txt" 2>/dev/null && "$0" evaluate -m "$1" --test "$3.en" "$3.hi" --cpu-threads 1 > "$3.pair.txt" 2>/dev/null && cmp "$3.tsv.txt" "$3.pair.txt" && echo "same scores" && wc -l < "$3.out"]=]
                 $<TARGET_FILE:anuvad> ${ANUVAD_CLI_MODEL} ${ANUVAD_CLI_DATA}/tiny.tsv ${CMAKE_BINARY_DIR}/cli_eval_pair
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(cli.evaluate_tiny_en_hi_pair PROPERTIES
  FIXTURES_REQUIRED cli_tiny_model
  PASS_REGULAR_EXPRESSION "^same scores\n *20\n$"
  FAIL_REGULAR_EXPRESSION "${ANUVAD_CLI_CRASH}"
  LABELS cli
  TIMEOUT 20)

anuvad_cli_model_test(evaluate_missing_test_set
                      "anuvad: error: [^\n]*no_such_corpus\\.tsv[^\n]*\nanuvad exit status 1 end"
                      evaluate -m ${ANUVAD_CLI_MODEL} --test ${ANUVAD_CLI_DATA}/no_such_corpus.tsv)
anuvad_cli_test(evaluate_needs_test_set "--test.*anuvad exit status [1-9][0-9]* end"
                evaluate -m ${ANUVAD_CLI_MODEL})
anuvad_cli_test(evaluate_bad_tokenizer "--tokenize.*anuvad exit status [1-9][0-9]* end"
                evaluate --test ${ANUVAD_CLI_DATA}/tiny.tsv --tokenize intl)

# --- Validation metrics during training -------------------------------------------------------

foreach(option --valid-metrics --early-stopping --valid-translation-output --valid-mini-batch --valid-freq)
  anuvad_cli_test(train_help${option} "[ ,]${option}[ =].*anuvad exit status 0 end" train --help)
endforeach()

anuvad_cli_test(train_unknown_valid_metric "--valid-metrics.*anuvad exit status [1-9][0-9]* end"
                train --train-sets ${ANUVAD_CLI_DATA}/tiny.tsv --valid-metrics accuracy
                -m ${CMAKE_BINARY_DIR}/cli_never_written.safetensors)

# chrf, bleu and cross-entropy on every update: one log line per validation with all three, the
# best model of each metric, and the greedy translations of the last validation (20 lines).
add_test(NAME cli.train_tiny_valid_metrics
         COMMAND sh -c [=[rm -f "$1".* && "$0" train --train-sets "$2" --valid-sets "$2" --config "$3" --after-epochs 2 --seed 1 --src-vocab-size 60 --tgt-vocab-size 80 -q --valid-freq 1 --valid-metrics chrf bleu cross-entropy --early-stopping 5 --valid-mini-batch 8 --valid-translation-output "$1.valid.txt" --cpu-threads 1 -m "$1.safetensors" 2>&1 && ls "$1".best-*.safetensors | sed 's/.*[.]best-/best-/' && wc -l < "$1.valid.txt"]=]
                 $<TARGET_FILE:anuvad> ${CMAKE_BINARY_DIR}/cli_valid ${ANUVAD_CLI_DATA}/tiny.tsv ${ANUVAD_CLI_DATA}/tiny_config.json
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(cli.train_tiny_valid_metrics PROPERTIES
  PASS_REGULAR_EXPRESSION "valid step 1 \\| chrf [0-9.]+ \\| bleu [0-9.]+ \\| cross-entropy [0-9.]+ nats/token \\| perplexity [0-9.]+ \\| new best: chrf, bleu, cross-entropy\n.*valid step 2 \\| chrf .*\nbest-bleu\\.safetensors\nbest-chrf\\.safetensors\nbest-cross-entropy\\.safetensors\n *20\n$"
  FAIL_REGULAR_EXPRESSION "${ANUVAD_CLI_CRASH}"
  LABELS cli
  TIMEOUT 20)

# --- anuvad average ---------------------------------------------------------------------------

# Mean of a model with itself = the model; of two runs = the element-wise mean; configs differ →
# an error naming the file.
add_test(NAME cli.average
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/average.sh $<TARGET_FILE:anuvad>
          ${ANUVAD_CLI_DATA}/tiny.tsv ${ANUVAD_CLI_DATA}/tiny_config.json)
set_tests_properties(cli.average PROPERTIES
  PASS_REGULAR_EXPRESSION "a\\+b is the mean"
  FAIL_REGULAR_EXPRESSION "${ANUVAD_CLI_CRASH}"
  LABELS cli
  TIMEOUT 60)

# Ensembles (--models, --weights): one model = the model byte for byte, a model twice with 0.5 0.5
# = the model, score of a + b = the weighted sum; bad --weights count and different target
# vocabularies are one-line errors.
add_test(NAME cli.ensemble
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/ensemble.sh $<TARGET_FILE:anuvad>
          ${ANUVAD_CLI_DATA}/tiny.tsv ${ANUVAD_CLI_DATA}/tiny_config.json)
set_tests_properties(cli.ensemble PROPERTIES
  PASS_REGULAR_EXPRESSION "ensembles: one model identical, a a 0.5 0.5 identical, scores weighted, errors refused"
  FAIL_REGULAR_EXPRESSION "${ANUVAD_CLI_CRASH}"
  LABELS cli
  TIMEOUT 120)
# translate, score and evaluate document the ensemble flags.
foreach(command translate score evaluate)
  anuvad_cli_test(${command}_help_models "--models.*--weights.*anuvad exit status 0 end" ${command} --help)
endforeach()

# --- Presets that stop by themselves, and the model left at -m ---------------------------------

# --preset small carries its stopping rule (--dump-config shows it); without a validation set its
# early stopping cannot act, and the run is refused before training.
anuvad_cli_test(train_small_preset_stopping_rule
  "\"early_stopping\": 8,.*\"final_model\": \"best\",.*\"valid_freq\": 300,.*\"valid_metrics\": \\[[^]]*\"chrf\".*anuvad exit status 0 end"
  train --preset small --dump-config)
anuvad_cli_test(train_small_preset_needs_validation
  "--early-stopping 8 \\(preset small\\) needs a validation set.*anuvad exit status [1-9][0-9]* end"
  train --preset small --train-sets ${ANUVAD_CLI_DATA}/tiny.tsv --no-valid -m ${CMAKE_BINARY_DIR}/cli_never_written.safetensors)
add_test(NAME cli.train_final_model
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/final_model.sh $<TARGET_FILE:anuvad>
          ${ANUVAD_CLI_DATA}/tiny.tsv ${ANUVAD_CLI_DATA}/tiny_config.json)
set_tests_properties(cli.train_final_model PROPERTIES
  PASS_REGULAR_EXPRESSION "interrupted run: model at -m loads"
  FAIL_REGULAR_EXPRESSION "${ANUVAD_CLI_CRASH}"
  LABELS cli
  TIMEOUT 120)
add_test(NAME cli.train_data_sampling_and_corpora
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/training_data.sh $<TARGET_FILE:anuvad>
          ${ANUVAD_CLI_DATA}/tiny.tsv ${ANUVAD_CLI_DATA}/tiny_config.json)
set_tests_properties(cli.train_data_sampling_and_corpora PROPERTIES
  PASS_REGULAR_EXPRESSION "lr decay: logged, refused at 1"
  FAIL_REGULAR_EXPRESSION "${ANUVAD_CLI_CRASH}"
  LABELS cli
  TIMEOUT 180)
anuvad_cli_test(train_sentencepiece_alphas_config
  "\"average_best\": 4,.*\"sentencepiece_alphas\": \\[[^]]*0.1,[^]]*0.2[^]]*\\].*anuvad exit status 0 end"
  train --sentencepiece-alphas 0.1 0.2 --dump-config)
add_test(NAME cli.train_average_best
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/average_best.sh $<TARGET_FILE:anuvad>
          ${ANUVAD_CLI_DATA}/tiny.tsv ${ANUVAD_CLI_DATA}/tiny_config.json)
set_tests_properties(cli.train_average_best PROPERTIES
  PASS_REGULAR_EXPRESSION "interrupted run: the average at -m loads"
  FAIL_REGULAR_EXPRESSION "${ANUVAD_CLI_CRASH}"
  LABELS cli
  TIMEOUT 180)
