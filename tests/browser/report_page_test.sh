#!/usr/bin/env bash
# The training report page in headless Chromium (CTest report.page, tests/report.cmake).
#   report_page_test.sh ANUVAD_EXE CORPUS.tsv CONFIG.json OUT_DIR
# Trains a tiny model on CORPUS.tsv with validation (cross-entropy, chrF, BLEU every 10 updates),
# stops it with SIGINT and resumes it with the same command, so its log holds two runs; the page
# `anuvad train` writes next to the log must then be what `anuvad report` writes from that log.
# Each page is loaded (--virtual-time-budget lets its script run) and its DOM read: #status must
# say "ok" (the page reports uncaught errors there), and the charts must have as many points as
# the log has events (expected numbers computed from the log with python3), the best chrF, BLEU
# and dev cross-entropy marked at the right step, the resume marked, the config table filled.
# Also: a log without validation, a run in progress (no "end" event), and a log whose config
# holds markup (it must show as text). Screenshots are left in OUT_DIR (report.png is the one
# copied to docs/report.png). Exits 77 (CTest: skipped) when Chromium is absent.
set -uo pipefail

. "$(dirname "$0")/chromium.sh"  # skips without Chromium; profile, fail, chrome
if [ $# -ne 4 ]; then
  echo "usage: $0 ANUVAD_EXE CORPUS.tsv CONFIG.json OUT_DIR" >&2
  exit 2
fi
anuvad=$1
corpus=$2
config=$3
out=$4
rm -rf "$out" && mkdir -p "$out" || exit 1

# --- the log: a run with validation, interrupted by SIGINT, then resumed to the end ----------
train=("$anuvad" train --train-sets "$corpus" --valid-sets "$corpus" -c "$config" --batch-tokens 60
       --seed 1 --src-vocab-size 60 --tgt-vocab-size 80 -q --disp-freq 1 --cpu-threads 1
       --valid-freq 10 --valid-metrics cross-entropy chrf bleu --learning-rate 0.003
       --warmup-steps 20 --after-steps 300 -m "$out/run.safetensors")
log=$out/run.log.jsonl
"${train[@]}" 2>"$out/train1.log" &
pid=$!
for _ in $(seq 1 3000); do
  n=$(grep -c '"event":"train"' "$log" 2>/dev/null)
  [ "${n:-0}" -ge 100 ] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.01
done
kill -INT "$pid" 2>/dev/null
wait "$pid"
status=$?
[ "$status" -eq 130 ] || { echo "FAIL: the first run was not interrupted (exit $status)"; cat "$out/train1.log"; exit 1; }
[ -s "$out/run.report.html" ] || fail "no page next to the log after the interrupted run"
cp "$out/run.report.html" "$out/interrupted.html"
"${train[@]}" 2>"$out/train2.log" || { echo "FAIL: the resumed run failed"; cat "$out/train2.log"; exit 1; }
[ -s "$out/run.report.html" ] || { echo "FAIL: no page next to the log after the resumed run"; exit 1; }
"$anuvad" report --from "$log" --html "$out/report.html" || { echo "FAIL: anuvad report"; exit 1; }
cmp -s "$out/run.report.html" "$out/report.html" ||
  fail "the page written by anuvad train differs from the one of anuvad report --from the same log"

# What the log implies: "train valid resumes best-chrf best-bleu best-ce" (first best, as marked).
expected() {
  python3 - "$1" <<'EOF'
import json, sys
events = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8") if line.strip()]
valid = [e for e in events if e["event"] == "valid"]
def best(metric, better):
    b = None
    for e in valid:
        if b is None or better(e["metrics"][metric], b["metrics"][metric]):
            b = e
    return b["step"] if b else ""
print(sum(e["event"] == "train" for e in events), len(valid),
      sum(e["event"] == "start" and e["resumed_from_step"] > 0 for e in events),
      best("chrf", lambda a, b: a > b), best("bleu", lambda a, b: a > b),
      best("cross-entropy", lambda a, b: a < b))
EOF
}

# load NAME PAGE HASH: dumps the DOM to OUT_DIR/NAME.dom.html; fails unless #status says ok.
load() {
  local name=$1 page=$2 hash=$3 status
  chrome --dump-dom "file://$page#$hash" >"$out/$name.dom.html" 2>"$out/$name.log"
  if grep -E 'CONSOLE.*(Uncaught|Error)' "$out/$name.log"; then fail "$name: script error in the console"; fi
  status=$(grep -o '<div id="status"[^>]*>[^<]*</div>' "$out/$name.dom.html" || echo "(no #status element)")
  echo "$name: $status"
  grep -Eq '>ok</div>$' <<<"$status" || fail "$name: status is not ok"
}
count() { grep -o "$2" "$out/$1.dom.html" | wc -l; }
# Number of points (M/L commands) of the path of class $2.
points() { grep -o "<path class=\"series $2\"[^>]*>" "$out/$1.dom.html" | grep -o 'd="[^"]*"' | grep -o '[ML]' | wc -l; }
check() { [ "$2" = "$3" ] || fail "$1: $2, expected $3"; }

# --- the finished, resumed run ------------------------------------------------------------------
read -r n_train n_valid n_resumes best_chrf best_bleu best_ce < <(expected "$log")
echo "log: $n_train train events, $n_valid validations, $n_resumes resume(s), best chrF at step $best_chrf, BLEU $best_bleu, cross-entropy $best_ce"
check "resumes in the log" "$n_resumes" 1
load report "$out/report.html" "selftest=1"
grep -q 'data-selftest="passed"' "$out/report.dom.html" || fail "report: the page's selftest did not pass"
check "training-loss points" "$(points report train-loss)" "$n_train"
check "learning-rate points" "$(points report lr)" "$n_train"
check "throughput points" "$(points report speed)" "$n_train"
check "dev cross-entropy points" "$(points report dev-ce)" "$n_valid"
check "chrF points" "$(points report chrf)" "$n_valid"
check "BLEU points" "$(points report bleu)" "$n_valid"
check "chrF markers" "$(count report '<circle class="pt chrf" data-step="[0-9]')" "$n_valid"
check "best chrF marked" "$(grep -o '<circle class="best chrf" data-step="[0-9]*"' "$out/report.dom.html")" \
  "<circle class=\"best chrf\" data-step=\"$best_chrf\""
check "best BLEU marked" "$(grep -o '<circle class="best bleu" data-step="[0-9]*"' "$out/report.dom.html")" \
  "<circle class=\"best bleu\" data-step=\"$best_bleu\""
check "best cross-entropy marked" "$(grep -o '<circle class="best dev-ce" data-step="[0-9]*"' "$out/report.dom.html")" \
  "<circle class=\"best dev-ce\" data-step=\"$best_ce\""
check "resume markers (4 charts)" "$(count report '<line class="resume" data-step="[0-9]')" $((4 * n_resumes))
check "runs table rows" "$(grep -o '<table id="runs">.*</table>' "$out/report.dom.html" | grep -o '<tr>' | wc -l)" 3
grep -q '<caption>training</caption>.*<th>batch_tokens</th><td>60</td>' "$out/report.dom.html" ||
  fail "config table: no training.batch_tokens 60"
grep -q '<caption>model</caption>.*<th>d_model</th><td>32</td>' "$out/report.dom.html" ||
  fail "config table: no model.d_model 32"
grep -q '<div id="run-state">finished at step 300</div>' "$out/report.dom.html" || fail "report: state is not finished at step 300"

# --- the page of the interrupted run, a run in progress, a run without validation ----------------
load interrupted "$out/interrupted.html" ""
grep -q '<div id="run-state">interrupted at step' "$out/interrupted.dom.html" || fail "interrupted: state"
head -n 40 "$log" >"$out/progress.log.jsonl"
"$anuvad" report --from "$out/progress.log.jsonl" --html "$out/progress.html" || fail "anuvad report (in progress)"
load progress "$out/progress.html" "selftest=1"
grep -q '<div id="run-state">in progress' "$out/progress.dom.html" || fail "progress: state"
grep -v '"event":"valid"' "$log" | head -n 60 >"$out/novalid.log.jsonl"
"$anuvad" report --from "$out/novalid.log.jsonl" --html "$out/novalid.html" || fail "anuvad report (no validation)"
load novalid "$out/novalid.html" ""
check "no validation: chrF points" "$(count novalid '<circle class="pt chrf" data-step="[0-9]')" 0
grep -q 'no validation in the log' "$out/novalid.dom.html" || fail "novalid: no message in the empty chart"

# --- markup in the log shows as text -------------------------------------------------------------
hostile="</script><script>document.title='pwned'</script><!--<b>bold</b>"
sed "s#\"preset\":\"tiny\"#\"preset\":\"$hostile\"#" "$log" >"$out/hostile.log.jsonl"
grep -q 'pwned' "$out/hostile.log.jsonl" || fail "hostile log: the substitution did not happen"
"$anuvad" report --from "$out/hostile.log.jsonl" --html "$out/hostile.html" || fail "anuvad report (hostile)"
load hostile "$out/hostile.html" ""
grep -q '<title>anuvad training report</title>' "$out/hostile.dom.html" || fail "hostile: the title changed"
grep -qF "<td>&lt;/script&gt;&lt;script&gt;document.title='pwned'&lt;/script&gt;&lt;!--&lt;b&gt;bold&lt;/b&gt;</td>" \
  "$out/hostile.dom.html" || fail "hostile: the preset is not shown as text"
[ "$(count hostile '<b>bold')" -eq 0 ] || fail "hostile: markup from the log was parsed"

for shot in report interrupted progress; do
  chrome --screenshot="$out/$shot.png" --window-size=1280,1500 "file://$out/$shot.html" \
    >/dev/null 2>"$out/$shot.screenshot.log"
  [ -s "$out/$shot.png" ] || fail "no screenshot $out/$shot.png"
done
echo "screenshots: $out/*.png (docs/report.png is $out/report.png)"

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all report page checks passed"
