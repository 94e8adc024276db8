// A request's state inside the scheduler, and its sequences.
//
// A request starts as ONE sequence (choice 0) that carries the other n - 1 choices as
// pending forks. All n choices sample their first token from the logits of the prompt's
// last token, computed once; then each other choice forks into its own sequence:
// it shares the prompt's FULL KV blocks (reference counts) and recomputes only the prompt's
// partially filled last block (fewer than block_size tokens) in a block of its own, so no
// block is ever written by two sequences. After the fork, choices are independent
// sequences (scheduled, preempted and resumed one by one).
//
// A sequence's tokens are prompt + generated. `computed` of them have KV in its blocks;
// the step that computes the last known token samples the next one.
//
// Thread contract: engine thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "engine/diffusion/canvas.h"
#include "scheduler/config.h"
#include "scheduler/request.h"
#include "scheduler/request_output.h"

namespace spillway::scheduler {

struct Request;

struct Sequence {
  enum class State { Waiting, Running, Finished };

  Request* request = nullptr;
  int32_t choice = 0;         // the choice whose tokens these are
  int32_t pending_forks = 0;  // choices choice+1 .. choice+pending_forks fork off this one
  State state = State::Waiting;

  std::vector<int32_t> tokens;        // prompt + generated
  int32_t computed = 0;               // tokens with KV in block_table
  std::vector<int32_t> block_table;   // covers [0, computed + scheduled)
  std::vector<uint64_t> block_hashes; // chained hashes of tokens' full blocks (prefix cache)
  int32_t registered_blocks = 0;      // leading blocks already offered to the prefix cache

  int32_t scheduled = 0;  // tokens to compute in the step being built / executed
  int32_t state_slot = -1;  // recurrent-state slot while running (hybrid models); else -1
  // Hybrid models with state snapshots: the snapshot slot this sequence re-saves its state
  // into at every block boundary past its prompt's last full block, and how many full blocks
  // that saved state covers (0: not saved yet). Published in the snapshot index when the
  // sequence finishes or is preempted, so a next chat turn (prompt + answer + new message)
  // resumes at the answer's last full block instead of recomputing the answer.
  int32_t tail_snapshot = -1;
  int32_t tail_snapshot_blocks = 0;

  // Diffusion requests: the canvas (prompt + masks) and its sampler state. Every step it is
  // in forwards the whole canvas (computed stays 0: its K/V are rewritten each step), it
  // always holds the blocks for its whole length while running, and it never enters the
  // prefix cache. canvas_emitted: canvas positions already handed to the choice's output
  // (the committed, left-contiguous part).
  std::unique_ptr<engine::diffusion::Canvas> canvas;
  int32_t canvas_emitted = 0;

  int32_t remaining() const { return static_cast<int32_t>(tokens.size()) - computed; }
  // Running slots this sequence holds (itself and the choices it will fork).
  int32_t slots() const { return 1 + pending_forks; }
};

struct Request {
  RequestId id = 0;
  GenerationParams params;
  UpdateSink sink;
  std::chrono::steady_clock::time_point submitted;

  int32_t n_prompt = 0;
  std::vector<ChoiceOutput> choices;
  std::vector<std::unique_ptr<Sequence>> sequences;

  bool admitted = false;              // the first step that computed it happened
  double queue_seconds = 0.0;
  int32_t cached_prompt_tokens = 0;
  std::optional<std::string> error;
  bool touched = false;               // has something to deliver after this step
  // Output back-pressure (Scheduler::set_output_paused): its client is not reading, so its
  // running sequences are not scheduled; they keep their KV blocks and state slots.
  bool output_paused = false;

  bool all_finished() const {
    for (const ChoiceOutput& c : choices) {
      if (!c.finished()) return false;
    }
    return true;
  }
  int32_t completion_tokens() const {
    int32_t n = 0;
    for (const ChoiceOutput& c : choices) n += c.generated();
    return n;
  }
};

}  // namespace spillway::scheduler
