#!/usr/bin/env bash
# Data-parallel training on Open MPI (issue #17), end to end, every dropout on (embeddings and
# residuals, attention weights, FFN hidden, source and target word dropout), several batches per
# epoch, a replica check every 10 updates (--save-freq 10; a divergence fails the run):
#  1. `mpirun -np 2 anuvad train` (model A, --allreduce fused) is bit-identical to one process
#     that computes the same two shards of every batch in rank order (--simulate-ranks 2), and to
#     2 ranks with the allreduce overlapped with the backward pass in small buckets (several per
#     update, --allreduce overlap-lazy; one float addition per element either way);
#  2. the loss of each of 60 updates of a 2-rank run is within 1e-5 (relative) of a plain
#     1-process run's with the same seed, batches and data: dropout masks are drawn per sentence
#     of the global batch (nn/dropout.h), so they do not depend on the rank count (only the
#     gradient summation order does);
#  3. a 2-rank run (--allreduce overlap, buckets polled between layers) whose rank 1 gets SIGTERM
#     mid-training stops on both ranks (exit 130, a checkpoint from rank 0; no rank left in an
#     unfinished bucket); resuming it with 2 ranks (overlap), and a copy of its checkpoint with
#     one process (--simulate-ranks 2), both finish with a model byte-identical to A;
#  4. `mpirun -np 2 anuvad evaluate` (mini-batches dealt out to the ranks) prints the scores and
#     writes the translations byte-identical to one process's;
#  5. SIGUSR1 to mpirun itself (which forwards it to every rank) stops training with a checkpoint
#     and exit 130 (on SIGINT/SIGTERM mpirun exits 1 whatever the ranks return: README).
# Usage: mpi.sh ANUVAD MPIRUN CORPUS.tsv CONFIG.json
set -uo pipefail
anuvad=$1 mpirun=$2 corpus=$3 config=$4
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# As root Open MPI needs --allow-run-as-root; 2 ranks on a shared 2-core machine, --oversubscribe
# (ranks then yield when idle); in containers the shared-memory transport cannot use CMA.
export OMPI_MCA_btl_vader_single_copy_mechanism=none
launch=("$mpirun" --oversubscribe -np 2)
[ "$(id -u)" -eq 0 ] && launch+=(--allow-run-as-root)
sed 's/"dropout": *[0-9.]*/"dropout": 0.1, "attention_dropout": 0.1, "ffn_dropout": 0.1, "dropout_src": 0.1, "dropout_trg": 0.1/' \
  "$config" > "$dir/drop.json"
grep -q '"dropout": 0.1' "$dir/drop.json" || { echo "$config: no dropout key to turn on"; exit 1; }
args=(train --train-sets "$corpus" --no-valid --batch-tokens 60 --cpu-threads 1 -q --disp-freq 1 --save-freq 10)
fail() { echo "$1"; shift; for f in "$@"; do echo "--- $f"; tail -20 "$f"; done; exit 1; }

# 1. Two ranks against their shards summed in one process.
"${launch[@]}" "$anuvad" "${args[@]}" -c "$dir/drop.json" --after-epochs 100 --allreduce fused -m "$dir/a.safetensors" \
  > "$dir/a.log" 2>&1 || fail "mpirun -np 2 train failed" "$dir/a.log"
grep -q "processes: 2 ranks × 1 threads" "$dir/a.log" || fail "the log does not report 2 ranks × 1 threads" "$dir/a.log"
"$anuvad" "${args[@]}" -c "$dir/drop.json" --after-epochs 100 --simulate-ranks 2 -m "$dir/s.safetensors" \
  > "$dir/s.log" 2>&1 || fail "--simulate-ranks 2 failed" "$dir/s.log"
cmp "$dir/a.safetensors" "$dir/s.safetensors" || fail "2 ranks and their shards in one process differ" "$dir/a.log" "$dir/s.log"
echo "mpirun -np 2: model byte-identical to --simulate-ranks 2 in one process ($(grep -o '[0-9]* steps' "$dir/a.log"))"
"${launch[@]}" "$anuvad" "${args[@]}" -c "$dir/drop.json" --after-epochs 100 --allreduce overlap-lazy \
  --allreduce-bucket-mb 0.01 -m "$dir/o.safetensors" > "$dir/o.log" 2>&1 || fail "--allreduce overlap-lazy failed" "$dir/o.log"
buckets=$(grep -o 'allreduce overlap-lazy in [0-9]* bucket' "$dir/o.log" | grep -o '[0-9]*')
[ "${buckets:-0}" -ge 3 ] || fail "--allreduce overlap-lazy: expected 3 or more buckets, got '$buckets'" "$dir/o.log"
cmp "$dir/a.safetensors" "$dir/o.safetensors" || fail "overlapped and fused allreduce differ" "$dir/a.log" "$dir/o.log"
echo "mpirun -np 2 --allreduce overlap-lazy ($buckets buckets): model byte-identical to the fused allreduce"

# 2. Two ranks against a plain single process, loss per update.
"${launch[@]}" "$anuvad" "${args[@]}" -c "$dir/drop.json" --after-steps 60 -m "$dir/p2.safetensors" \
  > "$dir/p2.log" 2>&1 || fail "mpirun -np 2 train (60 updates) failed" "$dir/p2.log"
"$anuvad" "${args[@]}" -c "$dir/drop.json" --after-steps 60 -m "$dir/p1.safetensors" \
  > "$dir/p1.log" 2>&1 || fail "1-process train (60 updates) failed" "$dir/p1.log"
python3 - "$dir/p2.log.jsonl" "$dir/p1.log.jsonl" <<'PY' || exit 1
import json, sys
def losses(path):
    events = [json.loads(line) for line in open(path)]
    return [e["loss"] for e in events if e.get("event") == "train"]
two, one = losses(sys.argv[1]), losses(sys.argv[2])
if len(two) != 60 or len(one) != 60:
    sys.exit(f"expected 60 train events each, got {len(two)} and {len(one)}")
worst = max(abs(a - b) / abs(b) for a, b in zip(two, one))
print(f"2 ranks vs 1 process, dropout on: largest relative loss difference over 60 updates {worst:.2e}")
if worst > 1e-5:
    sys.exit("more than 1e-5")
PY

# 3. SIGTERM on rank 1, then resume with 2 ranks and with 1 process.
overlap=(--allreduce overlap --allreduce-bucket-mb 0.02)
"${launch[@]}" "$anuvad" "${args[@]}" -c "$dir/drop.json" --after-epochs 100 "${overlap[@]}" -m "$dir/b.safetensors" > "$dir/b1.log" 2>&1 &
pid=$!
for _ in $(seq 1 6000); do grep -q "step 40 " "$dir/b1.log" 2>/dev/null && break; sleep 0.01; done
rank1=
for child in $(pgrep -P $pid); do
  tr '\0' '\n' < /proc/"$child"/environ 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1' && rank1=$child
done
[ -n "$rank1" ] || fail "no rank 1 among the children of mpirun (pid $pid)" "$dir/b1.log"
kill -TERM "$rank1"
wait $pid
code=$?
[ $code -eq 130 ] || fail "SIGTERM on rank 1: mpirun exit $code, expected 130" "$dir/b1.log"
[ -f "$dir/b.checkpoint.safetensors" ] || fail "SIGTERM on rank 1 left no checkpoint" "$dir/b1.log"
grep -q "interrupted after step" "$dir/b1.log" || fail "no interruption message from rank 0" "$dir/b1.log"
cp "$dir/b.checkpoint.safetensors" "$dir/c.checkpoint.safetensors"
"${launch[@]}" "$anuvad" "${args[@]}" -c "$dir/drop.json" --after-epochs 100 "${overlap[@]}" -m "$dir/b.safetensors" \
  > "$dir/b2.log" 2>&1 || fail "the 2-rank rerun failed" "$dir/b2.log"
grep -q "resuming from" "$dir/b2.log" || fail "the 2-rank rerun did not resume" "$dir/b2.log"
cmp "$dir/a.safetensors" "$dir/b.safetensors" || fail "2-rank resumed model differs from the uninterrupted one" "$dir/b2.log"
echo "SIGTERM on rank 1, then 2 ranks $(grep -o 'resuming from .*' "$dir/b2.log"): model identical"
"$anuvad" "${args[@]}" -c "$dir/drop.json" --after-epochs 100 --simulate-ranks 2 -m "$dir/c.safetensors" \
  > "$dir/c2.log" 2>&1 || fail "the 1-process rerun failed" "$dir/c2.log"
grep -q "resuming from" "$dir/c2.log" || fail "the 1-process rerun did not resume" "$dir/c2.log"
cmp "$dir/a.safetensors" "$dir/c.safetensors" || fail "1-process resumed model differs from the 2-rank one" "$dir/c2.log"
echo "the same checkpoint resumed by one process (--simulate-ranks 2): model identical"

# 4. Evaluation across 2 ranks against one process, model A, beam 2, 7 mini-batches of 3.
for n in 1 2; do
  run=("$anuvad"); [ $n -eq 2 ] && run=("${launch[@]}" "$anuvad")
  "${run[@]}" evaluate -m "$dir/a.safetensors" --test "$corpus" --mini-batch 3 -b 2 --cpu-threads 1 \
    -o "$dir/eval$n.txt" > "$dir/eval$n.out" 2> "$dir/eval$n.err" || fail "evaluate with $n rank(s) failed" "$dir/eval$n.err"
done
cmp "$dir/eval1.txt" "$dir/eval2.txt" && cmp "$dir/eval1.out" "$dir/eval2.out" ||
  fail "evaluate: 2 ranks and 1 process differ" "$dir/eval1.out" "$dir/eval2.out"
[ "$(wc -l < "$dir/eval2.txt")" -eq "$(wc -l < "$corpus")" ] || fail "evaluate -o: not one line per pair" "$dir/eval2.txt"
echo "mpirun -np 2 evaluate: scores and translations byte-identical to one process"

# 5. SIGUSR1 to mpirun.
"${launch[@]}" "$anuvad" "${args[@]}" -c "$dir/drop.json" --after-epochs 100 -m "$dir/u.safetensors" > "$dir/u.log" 2>&1 &
pid=$!
for _ in $(seq 1 6000); do grep -q "step 20 " "$dir/u.log" 2>/dev/null && break; sleep 0.01; done
kill -USR1 $pid
wait $pid
code=$?
[ $code -eq 130 ] || fail "SIGUSR1 to mpirun: exit $code, expected 130" "$dir/u.log"
[ -f "$dir/u.checkpoint.safetensors" ] || fail "SIGUSR1 to mpirun left no checkpoint" "$dir/u.log"
grep -q "interrupted after step" "$dir/u.log" || fail "SIGUSR1 to mpirun: no interruption message" "$dir/u.log"
echo "SIGUSR1 to mpirun: every rank stops with a checkpoint, exit 130"
