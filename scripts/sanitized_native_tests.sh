#!/usr/bin/env bash
# The native kernels' tests under AddressSanitizer and UndefinedBehaviorSanitizer: the package
# copied to a temporary folder, its C built there with ETK_C_SANITIZE=1 (setup.py), and the
# native tests (the trust boundary's fuzz among them) run against that build with the
# sanitizers' runtimes preloaded. Any report fails the run. Usage: scripts/sanitized_native_tests.sh
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d /tmp/etk-sanitized-XXXXXX)
trap 'rm -rf "$work"' EXIT
git ls-files -z | xargs -0 cp --parents -t "$work"
(cd "$work" && ETK_C_SANITIZE=1 python setup.py -q build_ext --inplace >/dev/null)
preload="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)"
cd "$work"
PYTHONPATH="$work" LD_PRELOAD="$preload" \
    ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    python -m pytest -q -p no:cacheprovider -n 0 \
    tests/sim/test_native_kernels.py tests/sim/test_native_trust_boundary.py \
    tests/sim/test_native_batch.py tests/sim/test_mlw_decoder.py
