#!/usr/bin/env bash
# `spillway bench --json` on the trained qwen3moe eval model with a small expert cache
# (issue #16): experts.decode covers exactly the timed decode tokens (gen x repeats), its
# figures follow from the counters (reads = (1 - hit rate) x asked for equal-sized experts,
# asked = distinct experts per layer-step x layers x expert bytes), and the histograms count
# what the counters count (one read time per miss, one experts-per-layer-step per MoE layer
# and step). No timing thresholds. Usage: bench_moe_expert_json.sh SPILLWAY SOURCE_DIR
set -euo pipefail
spillway=$1
model=$2/models/eval/qwen3moe/qwen3moe-tasks-f16.gguf
json=$("$spillway" bench --model "$model" --expert-cache 1M --prompt-tokens 16 --gen-tokens 4 --batch 1 \
  --repeat 2 --threads 2 --json --no-probe)
python3 - "$json" <<'PY'
import json, sys
j = json.loads(sys.argv[1])
e, d = j["experts"], j["experts"]["decode"]
fail = []
def check(ok, what):
    if not ok:
        fail.append(what)
expert_bytes = 3 * 128 * 64 * 2  # F16 experts of 3 matrices 128 x 64
check(d["tokens"] == 8, f"decode tokens {d['tokens']} != 4 x 2")
check(d["seconds"] > 0, "decode seconds")
check(0 <= d["hit_rate"] <= 1, "hit rate")
# Top-4 of 16 experts, 4 MoE layers, one token per decode step: 4 x 4 experts asked per token.
check(d["experts_per_layer_step"] == 4, f"experts per layer step {d['experts_per_layer_step']}")
check(d["requested_expert_bytes_per_token"] == 4 * 4 * expert_bytes, "asked bytes per token")
check(abs(d["expert_bytes_read_per_token"] - d["miss_bytes_bound_per_token"]) <= 1e-6 * expert_bytes,
      "reads != (1 - hit) x asked")
check(d["expert_bytes_read_per_token"] > 0, "a 1M cache (21 slots) misses in decode")
check(0 <= d["stall_fraction"] <= 1, "stall fraction")
miss = e["moe_expert_requests_total"]["miss"]
check(e["moe_expert_bytes_read_total"] == miss * expert_bytes, "bytes read != misses x expert bytes")
check(e["moe_expert_read_seconds"]["count"] == miss, "read-time observations != misses")
check(e["moe_expert_read_seconds"]["buckets"][-1]["count"] == miss, "+Inf bucket != misses")
steps = e["moe_experts_per_layer_step"]
check(steps["sum"] == e["moe_expert_requests_total"]["hit"] + miss, "experts per layer-step sum != requests")
check(steps["count"] % 4 == 0 and steps["count"] > 0, "layer-steps not a multiple of the 4 MoE layers")
if fail:
    print("FAIL:", "; ".join(fail)); print(json.dumps(e)); sys.exit(1)
print("ok:", json.dumps(d))
PY
