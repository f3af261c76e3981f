#!/usr/bin/env bash
# One short, prepared GPU check (under 8 minutes on one large GPU): the engine's batched-vs-alone ratio,
# the fraction of the device's float32 matmul rate, batched = alone within float32 rounding, the memory
# estimate against torch.cuda.max_memory_allocated, then a slice of a `gpu` preset (swept with a time
# limit and fitted). Results go to ${OUT:-gpu-check}/ (the store, the fit, this log).
#
#   bash benchmarks/gpu_check.sh            # on a machine with CUDA, after `pip install -e .`
#   SMOKE=1 bash benchmarks/gpu_check.sh    # tiny cells on the CPU: tries the script, no GPU numbers
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-gpu-check}"
mkdir -p "$OUT"
exec > >(tee "$OUT/gpu_check.log") 2>&1
date -u
if [ "${SMOKE:-0}" = "1" ]; then
  python benchmarks/gpu_check.py --device cpu --smoke --repeats 1
  echo "smoke run: no preset slice"
  exit $?
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
status=0
timeout 240 python benchmarks/gpu_check.py --device cuda --repeats 3 || status=$?
# a slice of a gpu preset: the rank-2 width experiment (m = d, d^2, d^3), swept on the GPU and fitted
timeout 180 recallkit sweep tr_fig4_mlp_width_rank2 --preset gpu --device cuda --store "$OUT/gpu.db" --no-progress \
  || { echo "gpu_check: the preset slice did not finish in 180 s (what it stored is kept in $OUT/gpu.db)"; status=1; }
recallkit fit tr_fig4_mlp_width_rank2 --preset gpu --store "$OUT/gpu.db" --no-run > "$OUT/fit.txt" 2>&1 || true
head -n 20 "$OUT/fit.txt"
date -u
exit $status
