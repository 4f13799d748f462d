#!/usr/bin/env bash
# Layers (DESIGN.md): a file under src/<layer>/ may include another layer's headers only if that layer
# comes earlier in `order` and is not in what the including layer "knows nothing of". Prints each
# include that breaks this, and exits 1 if any. Usage: scripts/check_layers.sh [source root]
# (CTest runs it as layer_edges.)
set -euo pipefail
cd "${1:-$(dirname "$0")/../src}"
order=(gguf tokenizer kernels model cuda grammar chat engine vector redis gateway cli)
declare -A forbidden=(
  [gguf]="model kernels" [tokenizer]="kernels engine" [kernels]="model engine"
  [model]="redis engine" [cuda]="redis engine" [chat]="kernels model cuda redis"
  [engine]="redis" [vector]="model engine" [redis]="kernels cuda"
  [gateway]="engine model kernels cuda" [cli]="redis"
)
declare -A rank=()
for i in "${!order[@]}"; do rank[${order[$i]}]=$i; done
bad=0
for layer in */; do
  layer=${layer%/}
  if [ -z "${rank[$layer]+x}" ]; then echo "src/$layer: a folder that is not a layer in DESIGN.md's order"; bad=1; continue; fi
  while IFS=: read -r file line target; do
    [ "$target" = "$layer" ] && continue
    if [ -z "${rank[$target]+x}" ]; then continue; fi  # not a layer: a system or library header
    if (( rank[$target] > rank[$layer] )) || [[ " ${forbidden[$layer]:-} " == *" $target "* ]]; then
      echo "src/$file:$line: $layer includes $target"; bad=1
    fi
  done < <(grep -rnoE '^[[:space:]]*#[[:space:]]*include[[:space:]]+"[a-z_]+/' "$layer" |
           sed -E 's/^([^:]+):([0-9]+):.*"([a-z_]+)\/$/\1:\2:\3/')
done
exit "$bad"
