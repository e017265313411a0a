#!/usr/bin/env bash
# The attention page in headless Chromium (CTest attention.page, tests/attention.cmake).
#   attention_page_test.sh FIXTURE_EXE ANUVAD_EXE OUT_DIR [MODEL]
# FIXTURE_EXE writes a dump of a small random model (3 sentences, the last one empty) and prints
# "encoder_layers decoder_layers heads T S sentences"; `anuvad attention` turns it into a page.
# Each check loads the page with a URL hash that selects a view (see docs/attention.md), lets
# its script run (--virtual-time-budget), and reads the DOM: #status must say "ok" (the page
# reports uncaught errors there through window.onerror) and the drawn elements must have the
# sizes the dump implies. With MODEL (a small trained model), the decoding view is checked too
# on pages that `anuvad translate --html` writes for greedy search and beam 4: as many tree
# nodes as the dump's beam trace has candidates (+ the start), the output path as long as the
# output, the self-test; its screenshots are OUT_DIR/decoding-greedy.png and decoding-beam4.png
# (the ones in docs/ come from here). Screenshots are left in OUT_DIR. Exits 77 (CTest:
# skipped) when Chromium is absent.
set -uo pipefail

. "$(dirname "$0")/chromium.sh"  # skips without Chromium; profile, fail, chrome
if [ $# -ne 3 ] && [ $# -ne 4 ]; then
  echo "usage: $0 FIXTURE_EXE ANUVAD_EXE OUT_DIR [MODEL]" >&2
  exit 2
fi
fixture=$1
anuvad=$2
out=$3
model=${4:-}
mkdir -p "$out" || exit 1

sizes=$("$fixture" "$out/attention_page.json") || { echo "FAIL: $fixture did not write a dump"; exit 1; }
read -r enc dec heads T S n_sentences <<<"$sizes"
echo "dump: $enc encoder + $dec decoder layers, $heads heads, sentence 0: T=$T S=$S, $n_sentences sentences"
"$anuvad" attention --from "$out/attention_page.json" --html "$out/attention_page.html" ||
  { echo "FAIL: anuvad attention"; exit 1; }
page="file://$out/attention_page.html"

# load NAME HASH: dumps the DOM to OUT_DIR/NAME.html and prints the #status element.
load() {
  local name=$1 hash=$2
  chrome --dump-dom "$page#$hash" >"$out/$name.dom.html" 2>"$out/$name.log"
  if grep -E 'CONSOLE.*(Uncaught|Error)' "$out/$name.log"; then fail "$name: script error in the console"; fi
  grep -o '<div id="status"[^>]*>[^<]*</div>' "$out/$name.dom.html" || echo "(no #status element)"
}
# expect NAME HASH STATUS_REGEX: loads and checks the #status element.
expect() {
  local name=$1 hash=$2 regex=$3 status
  status=$(load "$name" "$hash")
  echo "$name ($hash): $status"
  if ! grep -Eq '>ok</div>$' <<<"$status"; then fail "$name: status is not ok"; fi
  if ! grep -Eq "$regex" <<<"$status"; then fail "$name: status does not match $regex"; fi
}
count() { grep -o "$2" "$out/$1.dom.html" | wc -l; }

expect cross_heatmap "s=0&kind=cross&layer=0&head=0&view=heatmap" "data-cells=\"$((T * S))\""
cells=$(count cross_heatmap '<rect class="cell" data-q="[0-9]')
[ "$cells" -eq $((T * S)) ] || fail "cross-attention heatmap has $cells cells, expected T×S = $((T * S))"

expect cross_model "s=0&kind=cross&view=model" "data-panels=\"$((dec * heads))\""
panels=$(count cross_model '<div class="panel[ "][^>]*data-layer="[0-9]')
[ "$panels" -eq $((dec * heads)) ] || fail "model view has $panels panels, expected $dec×$heads"

expect head_view "s=0&kind=cross&head=avg&view=head" 'data-lines="[1-9][0-9]*"'
expect empty_sentence "s=$((n_sentences - 1))&view=heatmap" 'data-cells="0"'

# The scripted click-through, for each kind (encoder self, decoder self, cross): model view with
# layers × heads panels → click one → its heatmap with queries × keys cells; cell tooltip; rows
# of the average over heads sum to 1; head view hover (selftest() in src/inspect/page/attention.js).
expect selftest "selftest=1" 'data-selftest="passed"'

for shot in "cross_heatmap:s=0&kind=cross&layer=0&head=avg&view=heatmap" \
            "cross_model:s=0&kind=cross&view=model" "head_view:s=0&kind=cross&view=head"; do
  name=${shot%%:*}
  chrome --screenshot="$out/$name.png" --window-size=1400,1000 "$page#${shot#*:}" \
    >/dev/null 2>"$out/$name.screenshot.log"
  [ -s "$out/$name.png" ] || fail "no screenshot $out/$name.png"
done

# The decoding view on real translations (greedy and beam 4) of a small trained model.
if [ -n "$model" ]; then
  for beam in 1 4; do
    name=decoding-$([ "$beam" = 1 ] && echo greedy || echo beam$beam)
    "$anuvad" translate -m "$model" -b "$beam" --attention "$out/$name.json" --html "$out/$name.html" \
      "We are friends." "I like eating ice cream." "" >/dev/null || { fail "$name: anuvad translate"; continue; }
    # nodes: the start + every recorded candidate; path: the output tokens + the start.
    read -r nodes path_nodes < <(python3 -c 'import json, sys
s = json.load(open(sys.argv[1]))["sentences"][0]
print(1 + sum(len(h["candidates"]) for step in s["beam_trace"]["steps"] for h in step), len(s["tgt_tokens"]) + 1)' "$out/$name.json")
    page="file://$out/$name.html"
    expect "$name" "s=0&view=decoding" "data-nodes=\"$nodes\" data-path=\"$path_nodes\""
    drawn=$(count "$name" '<g class="node [a-z ]*" data-n=')
    [ "$drawn" -eq "$nodes" ] || fail "$name: $drawn tree nodes drawn, the trace has $nodes"
    # Greedy: one path; off it only runner-ups, and the hypothesis that was live when EOS ended
    # the search (the last step keeps a slot for the next-best token too).
    off_path=$(( $(count "$name" '<g class="node kept[a-z ]*" data-n=') - $(count "$name" '<g class="node kept path[a-z ]*" data-n=') ))
    if [ "$beam" = 1 ] && [ "$off_path" -gt 1 ]; then
      fail "$name: a greedy tree has $off_path kept nodes off the output path"
    fi
    expect "$name-selftest" "selftest=1" 'data-selftest="passed"'
    expect "$name-empty" "s=2&view=decoding" 'data-nodes="0"'
    chrome --screenshot="$out/$name.png" --window-size=1400,$([ "$beam" = 1 ] && echo 560 || echo 900) \
      "$page#s=0&view=decoding" \
      >/dev/null 2>"$out/$name.screenshot.log"
    [ -s "$out/$name.png" ] || fail "no screenshot $out/$name.png"
  done
fi
echo "screenshots: $out/*.png"

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all page checks passed"
