#!/usr/bin/env bash
# Check every model on a CUDA GPU with both backends and in the dynamic tier, then profile TreeLSTM and BiRNN there.
#   scripts/gpu-check.sh [DATA] [OUT]
# DATA: an SST tree file or folder (default: acrobat's default data); OUT: where logs go (default gpu-out).
# Needs torch with CUDA, greenlet and tqdm importable; run from the repository root.
set -uo pipefail
data=${1:+--data $1}
out=${2:-gpu-out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
python3 -c "import torch; print('torch', torch.__version__, 'on', torch.cuda.get_device_name())" | tee "$out/device.txt"
status=0
for model in treelstm birnn stackrnn drnn nestedrnn mvrnn berxit; do
  for backend in eager compiled; do
    echo "== $model $backend"
    python3 -m acrobat.cli run "$model" $data --device cuda --backend "$backend" --batch-size 64 --num-batches 3 \
      --check --json "$out/run-$model-$backend.json" > "$out/run-$model-$backend.log" 2>&1 || status=1
    tail -n 2 "$out/run-$model-$backend.log"
  done
done
echo "== the dynamic tier (Options(static=False)) on every paper model but Berxit"
python3 scripts/gpu_dynamic.py cuda 64 2>&1 | tee "$out/dynamic.txt" || status=1
for model in treelstm birnn; do
  python3 -m acrobat.cli profile "$model" $data --device cuda --batch-size 64 --num-batches 10 --warmup 15 \
    2>&1 | tee "$out/profile-$model.txt" || status=1
done
exit $status
