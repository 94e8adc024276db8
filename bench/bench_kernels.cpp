// Kernel micro-benchmarks (Google Benchmark).
//
//   build/dev/bench/bench_kernels --benchmark_min_time=0.01          # quick check
//   build/dev/bench/bench_kernels --benchmark_filter='matmul/.*/m:1/'  # GEMV only
//   SPILLWAY_BENCH_THREADS=1 build/dev/bench/bench_kernels ...         # pool size (default:
//                                                                      # physical cores)
// matmul at TinyLlama shapes (2048x2048 attention projections, 5632x2048 MLP up/gate) for
// every ISA this CPU runs, every weight type (Q8_0 / Q4_0 in the tiled layout the engine
// runs on, and row-major as "Q8_0-rows"), m = 1 (GEMV), 16, 64, 512 (GEMM; the scalar table
// only up to 16, it is slow). Copies of each weight matrix (512 MiB in all, as the probe's
// buffer, at most 64) are cycled so GEMV streams from DRAM rather than from the last-level
// cache. Also the Q8_0 / Q4_0 GEMV at 8224x1024 (Qwen3.5-0.8B's delta-net input projection).
// Counters: weight_bytes/s (weight bytes read per second) and ops/s (2*m*rows*cols).
// Attention: F16 paged KV cache as the engine lays it out, head_dim 64 x 8 query heads per kv
// head (TinyLlama GQA) or 256 x 4 (Qwen3.5), 1 query token (decode) or 8 (a prefill chunk), the
// KV in cache; attention_batch: one layer of a 16-sequence decode step, its KV from DRAM.
// quantize/q8_K, quantize/q8: one activation row into Q8_K blocks (5,632 values, a K-quant
// matmul's prologue) or into its place in a group of Q8 blocks (2,048 values, Q8_0 / Q4_0),
// in cache.
// decode_step/*: a TinyLlama-shaped decode step's 89 GEMVs in a row (decode_step/qwen35-0.8b/*:
// a Qwen3.5-0.8B-shaped step's 97 matmul calls), against plain reads of the same bytes one pool
// call per matmul and in one call (what the kernels and the barriers between matmuls cost;
// matmul_over_read: the first two side by side, their ratio overall and per part of the step;
// built on first use, ~0.9 G values quantized on one thread per shape and type).
// issue/avx2/*: the instruction mixes' issue rates (bench_issue_rate.cpp; bench/batch_bound.py
// sets them against the matmuls).
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/huge_pages.h"
#include "kernels/kernel_table.h"
#include "kernels/kernels.h"
#include "kernels/probe/machine_probe.h"
#include "kernels/thread_pool.h"
#include "bench_pool.h"

namespace spillway::kernels {

ThreadPool& bench_pool() {
  const char* env = std::getenv("SPILLWAY_BENCH_THREADS");
  static ThreadPool p(env && std::atoi(env) > 0 ? std::atoi(env) : physical_core_count());
  return p;
}

namespace {

// Allocated as the engine allocates resident weights (common/huge_pages.h): on transparent huge
// pages where the kernel allows them, so the GEMV rows and the DRAM probe pay the TLB costs the
// engine and `spillway bench`'s probe pay.
struct AlignedBytes {
  explicit AlignedBytes(size_t n) : size(n), data(static_cast<uint8_t*>(allocate_maybe_huge(n + 64, 64))) {}
  ~AlignedBytes() { std::free(data); }
  AlignedBytes(const AlignedBytes&) = delete;
  AlignedBytes& operator=(const AlignedBytes&) = delete;
  size_t size;
  uint8_t* data;
};

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

// The weight copies of the matrix benchmarked last (kept while consecutive benchmarks use
// the same type and shape).
struct WeightSet {
  DType type = DType::F32;
  WeightLayout layout = WeightLayout::Rows;
  int64_t rows = 0, cols = 0;
  std::vector<std::unique_ptr<AlignedBytes>> copies;
};

const WeightSet& weights(DType type, WeightLayout layout, int64_t rows, int64_t cols) {
  static WeightSet set;
  if (!set.copies.empty() && set.type == type && set.layout == layout && set.rows == rows && set.cols == cols) {
    return set;
  }
  set.copies.clear();
  set.type = type;
  set.layout = layout;
  set.rows = rows;
  set.cols = cols;
  const int64_t rb = row_bytes(type, cols);
  const size_t bytes = size_t(rb * rows);
  auto first = std::make_unique<AlignedBytes>(bytes);
  const std::vector<float> values = random_floats(size_t(rows * cols), uint32_t(rows + cols));
  for (int64_t r = 0; r < rows; ++r) quantize_row(type, values.data() + r * cols, first->data + r * rb, cols);
  if (layout == WeightLayout::Tiled) {
    std::vector<uint8_t> scratch(retile_scratch_bytes(type, cols));
    retile_in_place(type, first->data, rows, cols, scratch.data());
  }
  const size_t n_copies = std::min<size_t>(64, std::max<size_t>(1, (size_t{512} << 20) / bytes));
  set.copies.push_back(std::move(first));
  while (set.copies.size() < n_copies) {
    auto copy = std::make_unique<AlignedBytes>(bytes);
    std::memcpy(copy->data, set.copies.front()->data, bytes);
    set.copies.push_back(std::move(copy));
  }
  return set;
}

// The ISA's table without its two-stream GEMV kernels (tile_dot_pair, float_tile_pair): the
// driver then reads one tile at a time, as on an ISA that has none.
const KernelTable& one_stream_table(Isa isa) {
  static std::map<Isa, KernelTable> tables;
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  auto [it, inserted] = tables.try_emplace(isa, kernels_for(isa));
  if (inserted) {
    for (auto& f : it->second.tile_dot_pair) f = nullptr;
    for (auto& f : it->second.float_tile_pair) f = nullptr;
  }
  return it->second;
}

bool has_two_streams(Isa isa, DType type) {
  const DotKind kind = dot_kind(type);
  const KernelTable& kt = kernels_for(isa);
  if (kind.family == DotFamily::Float) return kt.float_tile_pair[kind.index] != nullptr;
  return kind.family == DotFamily::Tile && kt.tile_dot_pair[kind.index] != nullptr;
}

void bench_matmul(benchmark::State& state, Isa isa, bool one_stream, DType type, WeightLayout layout, int64_t rows,
                  int64_t cols, int64_t m) {
  const KernelTable& kt = one_stream ? one_stream_table(isa) : kernels_for(isa);
  const WeightSet& set = weights(type, layout, rows, cols);
  const std::vector<float> x = random_floats(size_t(m * cols), 7);
  std::vector<float> y(size_t(m * rows));
  WeightMatrix w{type, nullptr, rows, cols, layout};
  AlignedBytes scratch(matmul_scratch_bytes(w, m) + 64);
  size_t next = 0;
  for (auto _ : state) {
    w.data = set.copies[next]->data;
    next = (next + 1) % set.copies.size();
    matmul(kt, w, x.data(), m, y.data(), scratch.data, bench_pool());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const double weight_bytes = double(row_bytes(type, cols) * rows);
  state.counters["weight_bytes/s"] = benchmark::Counter(weight_bytes, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["ops/s"] = benchmark::Counter(2.0 * double(m) * double(rows) * double(cols),
                                               benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = bench_pool().size();
}

// A decode step's weight reads without the model: the matmuls of a TinyLlama-shaped step (22
// layers of qkv 2560x2048, wo 2048x2048, gate + up 2 x 5632x2048 in one matmul_multi, down
// 2048x5632; then the 32000x2048 output), every matrix its own copy (1.1 GB of Q8_0), in the
// order the forward pass runs them, one GEMV (m = 1) each. Against it, the same bytes read
// with the probe's streams loop (dram_read/streams) one pool call per matmul (each thread its
// share of each matrix, as a GEMV), and in a single pool call (each thread its share of every
// matrix in turn, no barrier between matrices). So: matmul against read_per_matmul is the GEMV
// kernels' cost over a plain read; read_per_matmul against read_once is what the barriers
// between matmuls cost (bench/README.md, "A decode step's matmuls without the model").
// matmul_over_read runs a matmul step and a read_per_matmul step in every iteration (in turn
// first) and reports both rates and their ratio: the host's DRAM rate moves by half within
// minutes, so only a ratio of steps taken side by side is steady (bench/README.md, "The GEMV
// against a plain read, step by step").
enum class StepRead { Matmul, ReadPerMatmul, ReadOnce, MatmulOverRead };

// One thread's share of a buffer read with a probe loop, as the probe splits its buffer:
// bytes / threads rounded down to the loops' 256-byte step, thread t at t x share (the last
// < 256 x threads bytes go unread).
using ReadLoop = uint64_t (*)(const uint8_t* p, size_t n);
size_t thread_share_bytes(size_t bytes, int threads) { return bytes / size_t(threads) / 256 * 256; }
uint64_t read_thread_share(ReadLoop read, const uint8_t* data, size_t bytes, int t, int threads) {
  const size_t share = thread_share_bytes(bytes, threads);
  return read(data + share * size_t(t), share);
}

// The matmul calls of one decode step, in the forward pass's order: each call one matmul_multi
// over its matrices (`first` .. `first + count` of `matrices`), of one part of the step.
enum StepPart { kStepQkv, kStepWo, kStepGateUp, kStepDown, kStepOutput, kStepParts };
constexpr const char* kStepPartNames[kStepParts] = {"qkv", "wo", "gate_up", "down", "output"};
struct StepCall {
  StepPart part;
  size_t first, count;
};
struct StepWeights {
  std::vector<std::unique_ptr<AlignedBytes>> store;
  std::vector<WeightMatrix> matrices;
  std::vector<StepCall> calls;
  int64_t max_rows = 0, max_cols = 0;
};
// TinyLlama: 22 layers of qkv 2560x2048, wo 2048x2048, gate + up 2 x 5632x2048, down 2048x5632;
// the 32000x2048 output (89 calls, 1.1 GB of Q8_0).
// Qwen3.5-0.8B (make-demo-model --shape qwen35-0.8b): 24 layers, every 4th gated attention
// (q + gate 4096, k 512, v 512 rows of 1024), the others Gated DeltaNet (qkv 6144, z 2048,
// and F32 b 16, a 16 rows of 1024); every layer's wo 1024x2048, gate + up 2 x 3584x1024, down
// 1024x3584; the 248320x1024 output (97 calls, 0.8 GB of Q8_0).
enum class StepShape { TinyLlama, Qwen35_08b };

// Built on first use, once per shape and type (one thread quantizes ~0.9 G values). The
// weights are 64 random rows repeated (the GEMV's work does not depend on the values),
// retiled as the engine keeps them.
const StepWeights& step_weights(StepShape shape, DType type) {
  static std::map<std::pair<StepShape, DType>, StepWeights> built;
  StepWeights& sw = built[{shape, type}];
  if (!sw.calls.empty()) return sw;
  auto matrix = [&](int64_t rows, int64_t cols, DType type) {
    const int64_t rb = row_bytes(type, cols);
    sw.store.push_back(std::make_unique<AlignedBytes>(size_t(rb * rows)));
    uint8_t* data = sw.store.back()->data;
    const std::vector<float> values = random_floats(size_t(cols) * 64, uint32_t(rows + cols));
    for (int64_t r = 0; r < rows; ++r) quantize_row(type, values.data() + (r % 64) * cols, data + r * rb, cols);
    const bool tiled = has_tiled_layout(type, cols);
    if (tiled) {
      std::vector<uint8_t> scratch(retile_scratch_bytes(type, cols));
      retile_in_place(type, data, rows, cols, scratch.data());
    }
    sw.matrices.push_back(WeightMatrix{type, data, rows, cols, tiled ? WeightLayout::Tiled : WeightLayout::Rows});
    sw.max_rows = std::max(sw.max_rows, rows);
    sw.max_cols = std::max(sw.max_cols, cols);
  };
  // A matrix of the call: of `type` unless f32 (the delta-net's b and a projections, F32 as
  // make-demo-model writes them).
  struct Shape {
    int64_t rows, cols;
    bool f32 = false;
  };
  auto call = [&](StepPart part, std::initializer_list<Shape> shapes) {
    sw.calls.push_back({part, sw.matrices.size(), shapes.size()});
    for (const Shape& m : shapes) matrix(m.rows, m.cols, m.f32 ? DType::F32 : type);
  };
  if (shape == StepShape::TinyLlama) {
    for (int l = 0; l < 22; ++l) {
      call(kStepQkv, {{2560, 2048}});
      call(kStepWo, {{2048, 2048}});
      call(kStepGateUp, {{5632, 2048}, {5632, 2048}});
      call(kStepDown, {{2048, 5632}});
    }
    call(kStepOutput, {{32000, 2048}});
  } else {
    for (int l = 0; l < 24; ++l) {
      if (l % 4 == 3) {
        call(kStepQkv, {{4096, 1024}, {512, 1024}, {512, 1024}});
      } else {
        call(kStepQkv, {{6144, 1024}, {2048, 1024}, {16, 1024, true}, {16, 1024, true}});
      }
      call(kStepWo, {{1024, 2048}});
      call(kStepGateUp, {{3584, 1024}, {3584, 1024}});
      call(kStepDown, {{1024, 3584}});
    }
    call(kStepOutput, {{248320, 1024}});
  }
  return sw;
}

void bench_decode_step(benchmark::State& state, StepShape shape, DType type, StepRead how) {
  const StepWeights& sw = step_weights(shape, type);
  auto matrix_bytes = [&](const WeightMatrix& w) { return size_t(row_bytes(w.type, w.cols) * w.rows); };
  double bytes = 0, part_bytes[kStepParts] = {};
  for (const StepCall& c : sw.calls) {
    for (size_t i = c.first; i < c.first + c.count; ++i) {
      bytes += double(matrix_bytes(sw.matrices[i]));
      part_bytes[c.part] += double(matrix_bytes(sw.matrices[i]));
    }
  }
  const std::vector<float> x = random_floats(size_t(sw.max_cols), 7);
  std::vector<std::vector<float>> ys(4, std::vector<float>(size_t(sw.max_rows)));
  size_t scratch_bytes = 0;
  for (const WeightMatrix& w : sw.matrices) scratch_bytes = std::max(scratch_bytes, matmul_scratch_bytes(w, 1));
  AlignedBytes scratch(scratch_bytes + 64);
  const KernelTable& kt = kernels_for(active_isa());
  const auto read = probe_loops(active_isa()).read_streams;
  const int threads = bench_pool().size();
  std::vector<uint64_t> sinks(static_cast<size_t>(threads));
  // Each thread reads its share of each matrix of ws, in turn (the unread tails: under 50 KB
  // of the step).
  auto read_shares = [&](std::span<const WeightMatrix> ws) {
    bench_pool().run_on_all([&](int t) {
      for (const WeightMatrix& w : ws) {
        sinks[size_t(t)] ^= read_thread_share(read, static_cast<const uint8_t*>(w.data), matrix_bytes(w), t, threads);
      }
    });
  };
  // One call's matrices as a GEMV or as a plain read; seconds[part] += its wall time.
  auto step_call = [&](const StepCall& c, bool plain_read, double* seconds) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::span<const WeightMatrix> ws(sw.matrices.data() + c.first, c.count);
    if (plain_read) {
      read_shares(ws);
    } else {
      const WeightMatrix* wp[4];
      float* yp[4];
      for (size_t i = 0; i < c.count; ++i) wp[i] = &ws[i], yp[i] = ys[i].data();
      matmul_multi(kt, std::span(wp, c.count), x.data(), 1, std::span(yp, c.count), scratch.data, bench_pool());
    }
    seconds[c.part] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  double matmul_seconds[kStepParts] = {}, read_seconds[kStepParts] = {};
  auto step = [&](bool plain_read) {
    for (const StepCall& c : sw.calls) step_call(c, plain_read, plain_read ? read_seconds : matmul_seconds);
  };
  bool read_first = false;
  for (auto _ : state) {
    switch (how) {
      case StepRead::ReadOnce: read_shares(sw.matrices); break;
      case StepRead::Matmul: step(false); break;
      case StepRead::ReadPerMatmul: step(true); break;
      case StepRead::MatmulOverRead:
        // Which goes first alternates, so neither always follows the other.
        for (bool plain_read : {read_first, !read_first}) step(plain_read);
        read_first = !read_first;
        break;
    }
    benchmark::DoNotOptimize(ys[0].data());
    benchmark::DoNotOptimize(sinks.data());
    benchmark::ClobberMemory();
  }
  if (how != StepRead::MatmulOverRead) {
    state.counters["weight_bytes/s"] = benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate);
    return;
  }
  const double steps = double(state.iterations());
  double matmul_total = 0, read_total = 0;
  for (int p = 0; p < kStepParts; ++p) {
    matmul_total += matmul_seconds[p], read_total += read_seconds[p];
    // Each part's GEMV over its plain read, side by side.
    state.counters[std::string(kStepPartNames[p]) + "/read"] = read_seconds[p] / matmul_seconds[p];
    state.counters[std::string(kStepPartNames[p]) + "_GB/s"] = part_bytes[p] * steps / matmul_seconds[p] / 1e9;
  }
  state.counters["matmul_GB/s"] = bytes * steps / matmul_total / 1e9;
  state.counters["read_GB/s"] = bytes * steps / read_total / 1e9;
  state.counters["matmul/read"] = read_total / matmul_total;
}

// One kv head's attention for n_tokens query tokens at the end of an n_ctx context, K laid
// out as the engine keeps it (transposed inside each block).
// kHeadDim x kGroup: 64 x 8 (llama-style GQA) or 256 x 4 (Qwen3.5's gated attention layers).
void bench_attention(benchmark::State& state, Isa isa, int64_t n_ctx, int n_tokens, int kHeadDim, int kGroup) {
  const KernelTable& kt = kernels_for(isa);
  constexpr int kKvHeads = 4, kBlock = 16;
  const int64_t n_blocks = (n_ctx + kBlock - 1) / kBlock;
  const int64_t token_elems = int64_t(kKvHeads) * kHeadDim;
  std::vector<uint16_t> k(size_t(n_blocks * kBlock * token_elems)), v(k.size());
  const std::vector<float> values = random_floats(k.size(), 3);
  for (size_t i = 0; i < k.size(); ++i) {
    k[i] = fp32_to_fp16(values[i]);
    v[i] = fp32_to_fp16(values[(i * 7) % values.size()]);
  }
  std::vector<int32_t> table(static_cast<size_t>(n_blocks));
  for (int64_t b = 0; b < n_blocks; ++b) table[size_t(b)] = int32_t((b * 5) % n_blocks);  // scattered blocks
  // Head-major, as engine/state/kv_cache.h: head h's run of block b at (h * n_blocks + b) * kBlock * kHeadDim.
  const int64_t head_block = int64_t(kBlock) * kHeadDim;
  KvView kview{DType::F16, k.data(), table.data(), kBlock, head_block, 1, n_blocks * head_block, kBlock};
  KvView vview{DType::F16, v.data(), table.data(), kBlock, head_block, kHeadDim, n_blocks * head_block, 1};
  const size_t q_stride = size_t(kGroup) * kHeadDim;
  const std::vector<float> q = random_floats(q_stride * n_tokens, 4);
  std::vector<float> out(q.size()), scratch(attention_scratch_floats(n_tokens, kGroup, n_ctx));
  std::vector<int64_t> key_counts(static_cast<size_t>(n_tokens));  // causal: the last n_tokens positions
  for (int j = 0; j < n_tokens; ++j) key_counts[size_t(j)] = n_ctx - n_tokens + j + 1;
  for (auto _ : state) {
    kt.attention(q.data(), q_stride, n_tokens, kGroup, kHeadDim, kview, vview, 1, key_counts.data(), 0.125f,
                 out.data(), q_stride, scratch.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["kv_bytes/s"] = benchmark::Counter(2.0 * double(n_ctx) * kHeadDim * 2,
                                                    benchmark::Counter::kIsIterationInvariantRate);
  state.counters["flops"] = benchmark::Counter(4.0 * double(n_ctx) * kHeadDim * kGroup * n_tokens,
                                               benchmark::Counter::kIsIterationInvariantRate);
}

// The attention of one decode step of a batch: n_seqs sequences x kKvHeads kv heads of head_dim
// 64 x 8 query heads at an n_ctx context, one layer per iteration, the (sequence, kv head) tasks
// taken from a shared counter by the pool's threads as engine/forward/attention_mixer.cpp does.
// The KV of kLayers layers (22, TinyLlama: 190 MB at 16 x 528 tokens, more than the caches
// hold) is allocated as engine/state/kv_cache.cpp allocates it (calloc; 4 KiB pages), or with
// `huge` on transparent huge pages (common/huge_pages.h), each sequence's blocks consecutive,
// and the layers cycled, so the KV comes from DRAM as it does in a step. kv_bytes/s: K and V
// bytes read per second.
void bench_attention_batch(benchmark::State& state, Isa isa, int64_t n_ctx, int n_seqs, bool huge) {
  const KernelTable& kt = kernels_for(isa);
  constexpr int kKvHeads = 4, kHeadDim = 64, kGroup = 8, kBlock = 16, kLayers = 22;
  const int64_t blocks_per_seq = (n_ctx + kBlock - 1) / kBlock, n_blocks = blocks_per_seq * n_seqs;
  const int64_t head_block = int64_t(kBlock) * kHeadDim, layer_elems = n_blocks * head_block * kKvHeads;
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  const size_t bytes = size_t(layer_elems * kLayers) * 2;
  auto allocate = [&] { return static_cast<uint16_t*>(huge ? allocate_maybe_huge(bytes, 64) : std::calloc(bytes, 1)); };
  std::unique_ptr<uint16_t, Free> k(allocate()), v(allocate());
  const std::vector<float> values = random_floats(4096, 3);
  for (int64_t i = 0; i < layer_elems * kLayers; ++i) {
    k.get()[i] = fp32_to_fp16(values[size_t(i % 4096)]);
    v.get()[i] = fp32_to_fp16(values[size_t((i * 7) % 4096)]);
  }
  std::vector<int32_t> tables(static_cast<size_t>(n_blocks));
  for (int64_t b = 0; b < n_blocks; ++b) tables[size_t(b)] = int32_t(b);
  const size_t q_dim = size_t(kKvHeads) * kGroup * kHeadDim;
  const std::vector<float> q = random_floats(q_dim * size_t(n_seqs), 4);
  std::vector<float> out(q.size());
  const int n_threads = bench_pool().size();
  const size_t scratch_floats = attention_scratch_floats(1, kGroup, n_ctx);
  std::vector<float> scratch(scratch_floats * size_t(n_threads));
  const int64_t key_count = n_ctx;
  int layer = 0;
  for (auto _ : state) {
    const uint16_t* kl = k.get() + int64_t(layer) * layer_elems;
    const uint16_t* vl = v.get() + int64_t(layer) * layer_elems;
    layer = (layer + 1) % kLayers;
    std::atomic<int64_t> next{0};
    bench_pool().run_on_all([&](int thread) {
      for (;;) {
        const int64_t i = next.fetch_add(1, std::memory_order_relaxed);
        if (i >= int64_t(n_seqs) * kKvHeads) return;
        const int64_t seq = i / kKvHeads;
        const int kv_head = int(i % kKvHeads);
        const int32_t* table = tables.data() + seq * blocks_per_seq;
        const KvView kview{DType::F16, kl, table, kBlock, head_block, 1, n_blocks * head_block, kBlock};
        const KvView vview{DType::F16, vl, table, kBlock, head_block, kHeadDim, n_blocks * head_block, 1};
        const size_t offset = size_t(seq) * q_dim + size_t(kv_head) * kGroup * kHeadDim;
        kt.attention(q.data() + offset, q_dim, 1, kGroup, kHeadDim, kview, vview, kv_head, &key_count, 0.125f,
                     out.data() + offset, q_dim, scratch.data() + size_t(thread) * scratch_floats);
      }
    });
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["kv_bytes/s"] = benchmark::Counter(2.0 * double(n_ctx) * kHeadDim * 2 * kKvHeads * n_seqs,
                                                    benchmark::Counter::kIsIterationInvariantRate);
}

// One activation row of a matmul quantized as the matmul's prologue does (in cache): Q8_K
// blocks for the K-quant weights (5,632 values: the FFN's down projection of TinyLlama).
void bench_quantize_q8_k(benchmark::State& state, Isa isa, int64_t n) {
  const KernelTable& kt = kernels_for(isa);
  const std::vector<float> x = random_floats(size_t(n), 7);
  std::vector<uint8_t> blocks(q8_k_row_stride(n));
  for (auto _ : state) {
    kt.quantize_q8_K(x.data(), blocks.data(), n);
    benchmark::DoNotOptimize(blocks.data());
  }
  state.counters["values/s"] = benchmark::Counter(double(n), benchmark::Counter::kIsIterationInvariantRate);
}

// The same for Q8_0 / Q4_0 weights: one row into its place in an interleaved group of Q8
// blocks (2,048 values: a decode token's input to the attention and gate/up projections).
void bench_quantize_q8(benchmark::State& state, Isa isa, int64_t n) {
  const KernelTable& kt = kernels_for(isa);
  const std::vector<float> x = random_floats(size_t(n), 7);
  std::vector<uint8_t> group(q8_group_bytes(n));
  for (auto _ : state) {
    kt.quantize_q8(x.data(), n, 128, group.data(), 3);
    benchmark::DoNotOptimize(group.data());
  }
  state.counters["values/s"] = benchmark::Counter(double(n), benchmark::Counter::kIsIterationInvariantRate);
}

// One decode token through the gated delta net of a Qwen3.5-0.8B-shaped model: 18 layers x 16
// value heads of 128 x 128 f32 states (19 MiB), the heads split over the pool. The states rotate
// through `sets` copies: iteration i reads copy i % sets and writes copy (i + 1) % sets, or
// (in_place) updates copy i % sets where it is, as the engine's steps that keep no undo do.
// sets = 2 is the engine's double buffer of one sequence; 8 copies (151 MiB) make every
// iteration's states cold, as a model step's weights leave them. state_bytes/s counts one read
// and one write of every state.
void bench_gdn_decode(benchmark::State& state, Isa isa, int sets, bool in_place) {
  const KernelTable& kt = kernels_for(isa);
  constexpr int kHeads = 18 * 16, kDim = 128;
  constexpr size_t kStateFloats = size_t(kDim) * kDim;
  const size_t set_floats = kHeads * kStateFloats;
  AlignedBytes buffers(size_t(sets) * set_floats * sizeof(float));
  float* states = reinterpret_cast<float*>(buffers.data);
  std::memset(states, 0, size_t(sets) * set_floats * sizeof(float));
  const std::vector<float> qkv = random_floats(3 * kDim, 11);
  std::vector<float> qk(2 * kDim);
  for (int i = 0; i < 2 * kDim; ++i) qk[size_t(i)] = qkv[size_t(i)] / 12.0f;  // about unit norm
  const float g = -0.05f, beta = 0.5f;
  std::vector<float> out(size_t(kHeads) * kDim);
  int which = 0;
  for (auto _ : state) {
    const int next = in_place ? which : (which + 1) % sets;
    bench_pool().parallel_for(kHeads, [&](int64_t begin, int64_t end) {
      for (int64_t h = begin; h < end; ++h) {
        GatedDeltaNetArgs a;
        a.state_in = states + size_t(which) * set_floats + size_t(h) * kStateFloats;
        a.state_out = states + size_t(next) * set_floats + size_t(h) * kStateFloats;
        a.dk = a.dv = kDim;
        a.n_tokens = 1;
        a.q = qk.data();
        a.k = qk.data() + kDim;
        a.qk_stride = 2 * kDim;
        a.v = qkv.data() + 2 * kDim;
        a.v_stride = kDim;
        a.g = &g;
        a.beta = &beta;
        a.gb_stride = 1;
        a.out = out.data() + h * kDim;
        a.out_stride = kDim;
        a.scale = 1.0f / std::sqrt(float(kDim));
        kt.gated_delta_net(a);
      }
    });
    which = (which + 1) % sets;
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["state_bytes/s"] = benchmark::Counter(2.0 * kHeads * kStateFloats * sizeof(float),
                                                       benchmark::Counter::kIsIterationInvariantRate);
}

// A prefill chunk through one gated delta net layer of the Qwen3.5-0.8B shape: 16 value heads
// of 128 x 128 f32 states, the recurrence over `tokens` tokens per head (the state stays in
// cache across them), the heads split over the pool. flops/s: 7 per state value and token (the
// decay multiply, S^T k, the rank-1 update and S^T q).
void bench_gdn_prefill(benchmark::State& state, Isa isa) {
  const KernelTable& kt = kernels_for(isa);
  const int n_tokens = static_cast<int>(state.range(0));
  constexpr int kHeads = 16, kDim = 128;
  constexpr size_t kStateFloats = size_t(kDim) * kDim;
  static AlignedBytes buffers(2 * kHeads * kStateFloats * sizeof(float));
  float* states = reinterpret_cast<float*>(buffers.data);
  std::memset(states, 0, 2 * kHeads * kStateFloats * sizeof(float));
  std::vector<float> qkv = random_floats(size_t(n_tokens) * 3 * kDim, 12);
  for (int t = 0; t < n_tokens; ++t) {
    for (int i = 0; i < 2 * kDim; ++i) qkv[size_t(t) * 3 * kDim + i] /= 12.0f;  // q, k about unit norm
  }
  const std::vector<float> g(size_t(n_tokens), -0.05f), beta(size_t(n_tokens), 0.5f);
  std::vector<float> out(size_t(n_tokens) * kHeads * kDim);
  for (auto _ : state) {
    bench_pool().parallel_for(kHeads, [&](int64_t begin, int64_t end) {
      for (int64_t h = begin; h < end; ++h) {
        GatedDeltaNetArgs a;
        a.state_in = states + size_t(h) * kStateFloats;
        a.state_out = states + (size_t(kHeads) + size_t(h)) * kStateFloats;
        a.dk = a.dv = kDim;
        a.n_tokens = n_tokens;
        a.q = qkv.data();
        a.k = qkv.data() + kDim;
        a.qk_stride = 3 * kDim;
        a.v = qkv.data() + 2 * kDim;
        a.v_stride = 3 * kDim;
        a.g = g.data();
        a.beta = beta.data();
        a.gb_stride = 1;
        a.out = out.data() + h * kDim;
        a.out_stride = kHeads * kDim;
        a.scale = 1.0f / std::sqrt(float(kDim));
        kt.gated_delta_net(a);
      }
    });
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["flops"] = benchmark::Counter(7.0 * kHeads * double(kStateFloats) * n_tokens,
                                               benchmark::Counter::kIsIterationInvariantRate);
}

// The machine probe's DRAM read loops over 512 MiB split between the pool's threads, the bound
// the GEMV rows compare with (weight_bytes/s), measured in the same process (machine_probe.h):
// dram_read/plain, dram_read/prefetch (software prefetch, where the ISA has it) and
// dram_read/streams (four parts of each thread's share read side by side). `spillway bench`
// takes the fastest; on the Zen 5 development VM that is usually the streams loop, by up to
// a third over the plain one (bench/README.md, "The probe reads four streams per thread").
enum class DramRead { Plain, Prefetch, Streams };
// The active ISA's loop of that kind; null where it has none.
auto dram_read_loop(DramRead kind) {
  const ProbeLoops& loops = probe_loops(active_isa());
  return kind == DramRead::Prefetch ? loops.read_prefetch : kind == DramRead::Streams ? loops.read_streams : loops.read;
}
void bench_dram_read(benchmark::State& state, DramRead kind) {
  const size_t bytes = size_t{512} << 20;
  static AlignedBytes buffer(bytes);
  static bool touched = false;
  if (!touched) {
    bench_pool().parallel_for(int64_t(bytes / 4096), [&](int64_t b, int64_t e) {
      std::memset(buffer.data + b * 4096, 1, size_t(e - b) * 4096);
    });
    touched = true;
  }
  const ReadLoop read = dram_read_loop(kind);
  const int threads = bench_pool().size();
  std::vector<uint64_t> sinks(static_cast<size_t>(threads));
  for (auto _ : state) {
    bench_pool().run_on_all(
        [&](int t) { sinks[size_t(t)] ^= read_thread_share(read, buffer.data, bytes, t, threads); });
    benchmark::DoNotOptimize(sinks.data());
  }
  state.counters["bytes/s"] = benchmark::Counter(double(thread_share_bytes(bytes, threads) * size_t(threads)),
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

void register_all() {
  for (const auto& [name, kind] : {std::pair{"dram_read/plain", DramRead::Plain},
                                    std::pair{"dram_read/prefetch", DramRead::Prefetch},
                                    std::pair{"dram_read/streams", DramRead::Streams}}) {
    if (dram_read_loop(kind) == nullptr) continue;
    benchmark::RegisterBenchmark(name, bench_dram_read, kind)->Unit(benchmark::kMillisecond)->UseRealTime();
  }
  constexpr DType kTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0, DType::Q4_0,
                              DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K};
  constexpr int64_t kShapes[][2] = {{2048, 2048}, {5632, 2048}};
  for (DType type : kTypes) {
    // Q8_0 / Q4_0: the tiled layout the engine runs on (resident or streamed layers), and the
    // row-major file layout (the plain engine on the file mapping), packed on the fly.
    std::vector<WeightLayout> layouts = {WeightLayout::Rows};
    if (has_tiled_layout(type, 2048)) layouts.insert(layouts.begin(), WeightLayout::Tiled);
    for (WeightLayout layout : layouts) {
      const std::string type_name =
          std::string(dtype_name(type)) + (layout == WeightLayout::Rows && has_tiled_layout(type, 2048) ? "-rows" : "");
      for (const auto& shape : kShapes) {
        for (int64_t m : {1, 16, 64, 512}) {
          for (Isa isa : supported_isas()) {
            if (isa == Isa::Scalar && m > 16) continue;
            const std::string name = "matmul/" + type_name + "/" + std::string(isa_name(isa)) + "/m:" +
                                     std::to_string(m) + "/" + std::to_string(shape[0]) + "x" + std::to_string(shape[1]);
            benchmark::RegisterBenchmark(name.c_str(), bench_matmul, isa, false, type, layout, shape[0], shape[1], m)
                ->Unit(benchmark::kMicrosecond)
                ->UseRealTime();
            if (m == 1 && layout == WeightLayout::Tiled && has_two_streams(isa, type)) {
              // The same GEMV reading one tile at a time (the kernels without a pair kernel).
              const std::string one = "matmul/" + type_name + "/" + std::string(isa_name(isa)) + "-one-stream/m:1/" +
                                      std::to_string(shape[0]) + "x" + std::to_string(shape[1]);
              benchmark::RegisterBenchmark(one.c_str(), bench_matmul, isa, true, type, layout, shape[0], shape[1], m)
                  ->Unit(benchmark::kMicrosecond)
                  ->UseRealTime();
            }
          }
        }
      }
    }
  }
  // A decode step's matmuls without the model, and plain reads of the same bytes (the active
  // ISA only: the comparison is about the memory, not the ISAs).
  for (const auto& [shape, shape_name] : {std::pair{StepShape::TinyLlama, ""}, std::pair{StepShape::Qwen35_08b, "qwen35-0.8b/"}}) {
    for (DType type : {DType::Q8_0, DType::Q4_0}) {
      for (const auto& [name, how] : {std::pair{"matmul", StepRead::Matmul},
                                      std::pair{"read_per_matmul", StepRead::ReadPerMatmul},
                                      std::pair{"read_once", StepRead::ReadOnce},
                                      std::pair{"matmul_over_read", StepRead::MatmulOverRead}}) {
        const std::string full = "decode_step/" + std::string(shape_name) + std::string(dtype_name(type)) + "/" + name;
        benchmark::RegisterBenchmark(full.c_str(), bench_decode_step, shape, type, how)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
      }
    }
  }
  // The GEMV of a narrower model: Qwen3.5-0.8B's delta-net input projection (qkv, z, b, a:
  // 8224 rows of 1024), whose 17 KiB Q8_0 tiles make the two streams' runs short when units
  // are small (kernels/matmul/matmul.cpp, kMaxPairedTilesPerUnit).
  for (DType type : {DType::Q8_0, DType::Q4_0}) {
    for (Isa isa : supported_isas()) {
      if (isa == Isa::Scalar) continue;
      const std::string name = "matmul/" + std::string(dtype_name(type)) + "/" + std::string(isa_name(isa)) + "/m:1/8224x1024";
      benchmark::RegisterBenchmark(name.c_str(), bench_matmul, isa, false, type, WeightLayout::Tiled, 8224, 1024, 1)
          ->Unit(benchmark::kMicrosecond)
          ->UseRealTime();
    }
  }
  for (Isa isa : supported_isas()) {
    const std::string name = "quantize/q8_K/" + std::string(isa_name(isa)) + "/n:5632";
    benchmark::RegisterBenchmark(name.c_str(), bench_quantize_q8_k, isa, 5632)->Unit(benchmark::kMicrosecond);
    const std::string groups = "quantize/q8/" + std::string(isa_name(isa)) + "/n:2048";
    benchmark::RegisterBenchmark(groups.c_str(), bench_quantize_q8, isa, 2048)->Unit(benchmark::kMicrosecond);
  }
  for (Isa isa : supported_isas()) {
    const std::string name = "gdn_decode/" + std::string(isa_name(isa)) + "/0.8b";
    benchmark::RegisterBenchmark(name.c_str(), bench_gdn_decode, isa, 2, false)->Unit(benchmark::kMicrosecond)->UseRealTime();
    for (bool in_place : {false, true}) {
      const std::string cold = name + (in_place ? "/cold:in_place" : "/cold:double_buffered");
      benchmark::RegisterBenchmark(cold.c_str(), bench_gdn_decode, isa, 8, in_place)
          ->Unit(benchmark::kMicrosecond)
          ->UseRealTime();
    }
    const std::string prefill = "gdn_prefill/" + std::string(isa_name(isa)) + "/0.8b";
    benchmark::RegisterBenchmark(prefill.c_str(), bench_gdn_prefill, isa)->Arg(64)->Unit(benchmark::kMicrosecond)->UseRealTime();
  }
  for (Isa isa : supported_isas()) {
    if (isa == Isa::Scalar) continue;
    for (bool huge : {false, true}) {
      const std::string name = "attention_batch/f16/" + std::string(isa_name(isa)) + "/hd:64x8/ctx:528/seqs:16/pages:" +
                               (huge ? "huge" : "4k");
      benchmark::RegisterBenchmark(name.c_str(), bench_attention_batch, isa, 528, 16, huge)
          ->Unit(benchmark::kMicrosecond)
          ->UseRealTime();
    }
  }
  for (const auto& [head_dim, group] : {std::pair{64, 8}, std::pair{256, 4}}) {
    for (int64_t n_ctx : {128, 512, 2048, 8192}) {
      for (int n_tokens : {1, kAttentionMaxTokens}) {
        for (Isa isa : supported_isas()) {
          const std::string name = "attention/f16/" + std::string(isa_name(isa)) + "/hd:" + std::to_string(head_dim) +
                                   "x" + std::to_string(group) + "/ctx:" + std::to_string(n_ctx) +
                                   "/tokens:" + std::to_string(n_tokens);
          benchmark::RegisterBenchmark(name.c_str(), bench_attention, isa, n_ctx, n_tokens, head_dim, group)
              ->Unit(benchmark::kMicrosecond);
        }
      }
    }
  }
}

}  // namespace
}  // namespace spillway::kernels

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  spillway::kernels::register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
