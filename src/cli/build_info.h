// What this anuvad binary is and where it was installed: the `--version` text (version, git
// revision, build features) and the directory of the bundled corpus of an installed copy.
#pragma once

#include <string>

namespace anuvad::cli {

/// The text of `anuvad --version`: "anuvad VERSION" on the first line (the form help2man and
/// GNU tools expect), then the git revision the binary was built from (`git describe --always
/// --dirty` at build time, "unknown" outside a git checkout) and its features: OpenMP version
/// and thread count, the matrix-product (BLAS) backend, and the CPU instruction-set extensions
/// the compiler targeted (from its predefined macros: __AVX2__, __FMA__, __AVX512F__, ...).
/// Never throws.
std::string version_text();

/// The bundled corpus of an installed anuvad (`<prefix>/share/anuvad/data`, holding train.tsv,
/// dev.tsv, test.tsv): found relative to the running executable (/proc/self/exe →
/// <prefix>/bin/anuvad), so a relocated install or a .deb works, else at the configured install
/// prefix. "" when neither directory has a train.tsv (e.g. a binary in its build folder).
/// Never throws.
std::string installed_corpus_dir();

}  // namespace anuvad::cli
