#!/usr/bin/env bash
# Ir per pooled alloc+free pair (pair_ir.sh) for the pool, red zones on and
# METRALE_REDZONE_REUSE=8, at 256 B and 1 MiB with 1k live blocks: the
# red-zone goal's rows (alloc_free/<size>/library_pool_redzone*/live1k).
#   bash bench/profile/pair_ir_matrix.sh [BUILD_DIR]   (default build)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
for bytes in 256 1048576; do
  for variant in pool redzone reuse8; do
    bash bench/profile/pair_ir.sh "$build" 1000 "$bytes" "$variant"
  done
done
