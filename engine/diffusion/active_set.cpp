#include "engine/diffusion/active_set.h"

#include <algorithm>
#include <cassert>

#include "engine/diffusion/canvas.h"

namespace spillway::engine::diffusion {

void compacted_positions(const Canvas& canvas, std::span<const int32_t> masked,
                         std::span<const int32_t> last_commits, std::vector<int32_t>& out) {
  out.clear();
  if (canvas.params().compact_all_live) {
    for (int32_t p = 0; p < canvas.length(); ++p) out.push_back(p);
    return;
  }
  for (int32_t p : masked) {
    const int32_t r = canvas.logit_row(p);
    if (r != p) out.push_back(r);
    out.push_back(p);
  }
  out.insert(out.end(), last_commits.begin(), last_commits.end());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
}

void fill_canvas_sequence(const Canvas& canvas, BatchSequence& bs, std::vector<int32_t>& tokens) {
  bs.first_token = static_cast<int32_t>(tokens.size());
  bs.mode = AttentionMode::Canvas;
  bs.canvas_end = canvas.length();
  const std::span<const int32_t> live = canvas.forward_positions();
  if (!live.empty()) {
    bs.positions.assign(live.begin(), live.end());
    bs.start_position = live.front();
    bs.n_tokens = static_cast<int32_t>(live.size());
    bs.canvas_begin = 0;
    for (int32_t p : live) tokens.push_back(canvas.tokens()[p]);
    return;
  }
  const Canvas::Range range = canvas.forward_range();
  bs.positions.clear();
  bs.start_position = range.begin;
  bs.n_tokens = range.end - range.begin;
  bs.canvas_begin = range.begin;
  tokens.insert(tokens.end(), canvas.tokens().begin() + range.begin, canvas.tokens().begin() + range.end);
}

int32_t forwarded_index(const Canvas& canvas, int32_t row) {
  const std::span<const int32_t> live = canvas.forward_positions();
  if (live.empty()) {
    assert(row >= canvas.forward_range().begin && row < canvas.forward_range().end);
    return row - canvas.forward_range().begin;
  }
  const auto it = std::lower_bound(live.begin(), live.end(), row);
  assert(it != live.end() && *it == row);
  return static_cast<int32_t>(it - live.begin());
}

}  // namespace spillway::engine::diffusion
