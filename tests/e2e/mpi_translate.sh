#!/usr/bin/env bash
# `mpirun -np 2 anuvad translate` (issue #17): rank 0 reads the input and the mini-batches are
# dealt out to the ranks; everything written is byte-identical to one process's:
#  1. the dev set, greedy (with --word-scores and --alignment hard) and beam 4 (--n-best,
#     --word-scores, --alignment soft, --attention, --beam-trace, --html), 13 mini-batches of 8;
#     and rank 1 really decodes its share: given --max-length 1 on rank 1 alone, some records
#     (not all) change;
#  2. the same streamed line by line (--mini-batch 1), and sentences given as arguments;
#  3. an invalid line among good ones: the same records, one error message, exit status 1;
#  4. a model missing on rank 1 only ends the whole job with an error (MPI_Abort), no hang.
# Usage: mpi_translate.sh ANUVAD MPIRUN MODEL DEV.tsv
set -uo pipefail
anuvad=$1 mpirun=$2 model=$3 dev=$4
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# As in mpi.sh: root needs --allow-run-as-root, 2 ranks on a shared 2-core machine
# --oversubscribe, and containers a shared-memory transport without CMA.
export OMPI_MCA_btl_vader_single_copy_mechanism=none
opts=(--oversubscribe)
[ "$(id -u)" -eq 0 ] && opts+=(--allow-run-as-root)
launch=("$mpirun" "${opts[@]}" -np 2)
fail() { echo "$1"; shift; for f in "$@"; do echo "--- $f"; tail -20 "$f"; done; exit 1; }
cut -f1 "$dev" > "$dir/dev.en"

# translate NAME RANKS INPUT ARGS...: stdout, stderr and exit status in $dir/NAME.RANKS.*; every
# file argument written as $dir/NAME.RANKS.<file>.
translate() {
  local name=$1 n=$2 input=$3 run=("$anuvad") args=()
  shift 3
  [ "$n" -eq 2 ] && run=("${launch[@]}" "$anuvad")
  for a in "$@"; do args+=("${a//@/$dir/$name.$n.}"); done
  timeout 300 "${run[@]}" translate -m "$model" --cpu-threads 1 "${args[@]}" < "$input" \
    > "$dir/$name.$n.out" 2> "$dir/$name.$n.err"
  echo $? > "$dir/$name.$n.code"
}
# same NAME FILES...: the 1-process and 2-rank versions of each file are byte-identical.
same() {
  local name=$1
  shift
  for f in "$@"; do
    [ -s "$dir/$name.1.$f" ] || fail "$name: 1 process wrote no $f" "$dir/$name.1.err"
    cmp "$dir/$name.1.$f" "$dir/$name.2.$f" || fail "$name: $f differs between 1 process and 2 ranks" "$dir/$name.2.err"
  done
}

# 1. The dev set, greedy and beam 4, every output format.
for n in 1 2; do
  translate greedy $n "$dir/dev.en" --mini-batch 8 --word-scores --alignment hard
  translate beam4 $n "$dir/dev.en" --mini-batch 8 -b 4 --n-best --word-scores --alignment soft \
    --attention @attention.json --beam-trace @trace.json --html @page.html
done
same greedy out code
same beam4 out code attention.json trace.json page.html
[ "$(cat "$dir/beam4.2.code")" -eq 0 ] || fail "beam 4 with 2 ranks failed" "$dir/beam4.2.err"
[ "$(wc -l < "$dir/beam4.2.out")" -eq $((4 * $(wc -l < "$dir/dev.en"))) ] || fail "beam 4: not 4 n-best records per line" "$dir/beam4.2.out"
echo "dev set, greedy and beam 4: stdout, --attention, --beam-trace and --html byte-identical with 2 ranks"

# Rank 1 decodes its share: with --max-length 1 on rank 1 only (an MPMD launch, one command line
# per rank), the records of the mini-batches dealt to it change, the others do not.
greedy=(translate -m "$model" --cpu-threads 1 --mini-batch 8 --word-scores --alignment hard)
timeout 300 "$mpirun" "${opts[@]}" -np 1 "$anuvad" "${greedy[@]}" : -np 1 "$anuvad" "${greedy[@]}" --max-length 1 \
  < "$dir/dev.en" > "$dir/share.out" 2> "$dir/share.err" || fail "the MPMD run failed" "$dir/share.err"
changed=$(diff "$dir/greedy.1.out" "$dir/share.out" | grep -c '^>')
lines=$(wc -l < "$dir/dev.en")
[ "$changed" -gt 0 ] && [ "$changed" -lt "$lines" ] || fail "--max-length 1 on rank 1 changed $changed of $lines records" "$dir/share.out"
echo "rank 1 decodes its share: --max-length 1 there changes $changed of $lines records"

# 2. Line by line (--mini-batch 1) and arguments.
for n in 1 2; do translate stream $n "$dir/dev.en" --mini-batch 1 -b 2 --n-best; done
same stream out code
for n in 1 2; do translate args $n /dev/null -b 4 --word-scores "How are you?" "" "Thank you."; done
same args out code
echo "--mini-batch 1 (line by line) and sentences as arguments: byte-identical with 2 ranks"

# 3. An invalid line: the same records, one error message (from rank 0), exit status 1.
{ head -5 "$dir/dev.en"; printf 'bad \xff line\n\n'; sed -n 6,12p "$dir/dev.en"; } > "$dir/bad.en"
for n in 1 2; do translate bad $n "$dir/bad.en" --mini-batch 3 -b 4 --word-scores; done
same bad out
[ "$(cat "$dir/bad.1.code")" -eq 1 ] && [ "$(cat "$dir/bad.2.code")" -eq 1 ] ||
  fail "an invalid line: exit status $(cat "$dir/bad.1.code") (1 process), $(cat "$dir/bad.2.code") (2 ranks), expected 1" "$dir/bad.2.err"
[ "$(grep -c 'anuvad: error: <stdin>:6: invalid UTF-8' "$dir/bad.2.err")" -eq 1 ] ||
  fail "an invalid line: not one error message from 2 ranks" "$dir/bad.2.err"
echo "an invalid line: the same output, one error message, exit 1 with 2 ranks"

# 4. The model missing on rank 1 only (an MPMD launch: one command line per rank).
start=$SECONDS
timeout 120 "$mpirun" "${opts[@]}" -np 1 "$anuvad" translate -m "$model" --cpu-threads 1 : -np 1 "$anuvad" translate \
  -m "$dir/missing.safetensors" --cpu-threads 1 < "$dir/dev.en" > "$dir/missing.out" 2> "$dir/missing.err"
code=$?
[ $code -ne 0 ] && [ $code -ne 124 ] || fail "model missing on rank 1: exit status $code (124 = hung)" "$dir/missing.err"
grep -q "missing.safetensors" "$dir/missing.err" || fail "model missing on rank 1: no error naming it" "$dir/missing.err"
echo "model missing on rank 1: the job ends in $((SECONDS - start)) s with exit status $code"
