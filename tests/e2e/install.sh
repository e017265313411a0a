#!/usr/bin/env bash
# An installed anuvad needs nothing from the source tree: `cmake --install` into a temporary
# prefix, then, from a directory without data/, `anuvad --version`, `anuvad train` without
# corpus flags (it finds the bundled corpus under PREFIX/share/anuvad/data; a tiny network for a
# few updates), `anuvad translate` with the model it wrote, and the man pages when help2man
# built them (MAN_PAGES=1).
# Usage: install.sh CMAKE BUILD_DIR MAN_PAGES
set -euo pipefail
cmake=$1 build=$2 man_pages=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
"$cmake" --install "$build" --prefix "$prefix" > "$tmp/install.log"
anuvad=$prefix/bin/anuvad
for f in share/anuvad/data/train.tsv share/anuvad/data/dev.tsv share/doc/anuvad/README.md \
         share/doc/anuvad/model-format.md; do
  test -s "$prefix/$f" || { echo "not installed: $f"; exit 1; }
done

"$anuvad" --version > "$tmp/version"
cat "$tmp/version"
grep -q '^anuvad [0-9][0-9.]*$' "$tmp/version"
grep -q '^git revision: .' "$tmp/version"
grep -q '^threads: OpenMP [0-9.]*, [0-9]* by default' "$tmp/version"
grep -q '^BLAS: .' "$tmp/version"
grep -q '^CPU flags: .' "$tmp/version"

mkdir "$tmp/work"
cd "$tmp/work"
"$anuvad" train -q --disp-freq 0 --after-steps 3 --dim-emb 32 --transformer-heads 2 \
  --transformer-dim-ffn 64 --enc-depth 1 --dec-depth 1 --cpu-threads 1 2> train.log || { cat train.log; exit 1; }
grep "installed corpus $prefix/share/anuvad/data/train.tsv" train.log
grep -q "valid step 3 " train.log || { cat train.log; echo "no validation on the installed dev.tsv"; exit 1; }
test -s models/default.safetensors
"$anuvad" translate "How are you?" "We are friends." > out.txt
test "$(wc -l < out.txt)" -eq 2
echo "trained and translated from $tmp/work without corpus flags"

if [ "$man_pages" = 1 ]; then
  for page in anuvad anuvad-train anuvad-translate anuvad-score anuvad-evaluate; do
    test -s "$prefix/share/man/man1/$page.1" || { echo "no man page $page(1)"; exit 1; }
  done
  if command -v man > /dev/null; then
    MANPAGER=cat MANWIDTH=80 man -l "$prefix/share/man/man1/anuvad.1" > man.txt 2> /dev/null
  else  # no man-db: the page source
    cp "$prefix/share/man/man1/anuvad.1" man.txt
  fi
  grep -q 'SYNOPSIS' man.txt && grep -q 'anuvad.*SUBCOMMAND' man.txt && grep -q 'anuvad-train' man.txt
  echo "man pages installed and rendered"
else
  echo "man pages not built (no help2man): not checked"
fi
