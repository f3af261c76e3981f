#!/usr/bin/env bash
# One short, prepared GPU check (under 8 minutes on one large GPU): the engine's batched-vs-alone ratio,
# the fraction of the device's float32 matmul rate, batched = alone within float32 rounding, the memory
# estimate against torch.cuda.max_memory_allocated, then slices of `gpu` presets (each swept with a time
# limit and fitted). Results go to ${OUT:-gpu-check}/ (a store and a fit per slice, this log).
#
#   bash benchmarks/gpu_check.sh            # on a machine with CUDA, after `pip install -e .`
#   SMOKE=1 bash benchmarks/gpu_check.sh    # tiny cells on the CPU: tries the script, no GPU numbers
#
# Time limits (seconds) and the slices can be set from the environment, to fit a lease:
#   CHECK_S=240 REPEATS=3 SLICE_S=180 SLICES="tr_fig4_mlp_width_rank2 tr_fig2_attention_only"
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-gpu-check}"
# python3, not python: a GPU image may have only python3 (the one that holds torch); a symlink named python
# outside its virtual environment starts a Python without torch (the first GPU run lost this step so)
PYTHON="${PYTHON:-python3}"
mkdir -p "$OUT"
exec > >(tee "$OUT/gpu_check.log") 2>&1
date -u
if [ "${SMOKE:-0}" = "1" ]; then
  "$PYTHON" benchmarks/gpu_check.py --device cpu --smoke --repeats 1
  echo "smoke run: no preset slice"
  exit $?
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
CHECK_S="${CHECK_S:-240}" REPEATS="${REPEATS:-3}" SLICE_S="${SLICE_S:-180}"
SLICES="${SLICES:-tr_fig4_mlp_width_rank2}"
status=0
# the cheap cell first, so that a time limit cuts the expensive one, not both
SECONDS=0
timeout "$CHECK_S" "$PYTHON" benchmarks/gpu_check.py --device cuda --cells tr_fig4,tr_fig2 --repeats "$REPEATS" || status=$?
echo "gpu_check.py: ${SECONDS} s"
# slices of gpu presets, each swept on the GPU under a time limit and fitted from what it stored
for exp in $SLICES; do
  SECONDS=0
  timeout "$SLICE_S" recallkit sweep "$exp" --preset gpu --device cuda --store "$OUT/$exp.db" --no-progress \
    || { echo "gpu_check: $exp did not finish in $SLICE_S s (what it stored is kept in $OUT/$exp.db)"; status=1; }
  echo "$exp sweep: ${SECONDS} s"
  recallkit fit "$exp" --preset gpu --store "$OUT/$exp.db" --no-run > "$OUT/$exp.fit.txt" 2>&1 || true
  head -n 60 "$OUT/$exp.fit.txt"
done
date -u
exit $status
