#!/usr/bin/env bash
# The whole test suite under AddressSanitizer (with LeakSanitizer) and UndefinedBehaviorSanitizer
# (issue #8): configures, builds and runs ctest in BUILD_DIR (default build-sanitize, relative to
# the repository root), then prints the build, test and total times. Exit status: ctest's; every
# sanitizer report is fatal, so it fails the test that triggered it.
#
#   bash tests/sanitizers/run.sh [BUILD_DIR [CTEST ARGS...]]    JOBS=N: build jobs (default 2)
#   e.g. bash tests/sanitizers/run.sh build-sanitize -LE e2e    (everything but the e2e label)
#
# Choices (measurements in tests/sanitizers/README.md):
#  - -O1 -g: compiles ~30% faster than -O2 under the sanitizers, and the matrix products that
#    dominate the run time are as fast; NDEBUG as in the product build.
#  - float-cast-overflow on top of "undefined": GCC leaves it out of -fsanitize=undefined (clang
#    includes it); an out-of-range float → int conversion is undefined behaviour.
#  - CMakeLists.txt adds -fno-sanitize-address-use-after-scope for "address" (Eigen's GEMM kernel
#    runs ~4x slower with it); detect_stack_use_after_return still catches escaping stack frames.
#  - halt_on_error and -fno-sanitize-recover=all: the first report ends the process, with a stack.
#  - No LeakSanitizer suppressions are needed (libgomp and spdlog report nothing); if a
#    third-party leak ever shows up, add LSAN_OPTIONS=suppressions=FILE here, never for our code.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${1:-build-sanitize}
shift $(($# > 0 ? 1 : 0))
case $build in /*) ;; *) build=$root/$build ;; esac

export ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

# Without MPI (-DANUVAD_MPI=OFF): LeakSanitizer reports ~120 kB of Open MPI 4.1.4's own allocations
# (MPI_Init never frees them) at every rank's exit; this also builds and tests the
# binary without MPI; the MPI test runs in the plain build (README "Tests").
start=$SECONDS
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g -DNDEBUG" \
  -DANUVAD_SANITIZE=address,undefined,float-cast-overflow -DANUVAD_NATIVE=ON -DANUVAD_MPI=OFF
cmake --build "$build" -j"${JOBS:-2}"
built=$SECONDS
status=0
ctest --test-dir "$build" --output-on-failure -j1 "$@" || status=$?
end=$SECONDS
printf 'sanitizer build: %dm%02ds, ctest: %dm%02ds, total: %dm%02ds\n' \
  $(((built - start) / 60)) $(((built - start) % 60)) $(((end - built) / 60)) $(((end - built) % 60)) \
  $(((end - start) / 60)) $(((end - start) % 60))
exit $status
