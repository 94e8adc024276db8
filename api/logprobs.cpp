#include "api/logprobs.h"

#include <cmath>

#include "api/text_encoding.h"

namespace spillway::api {

namespace {

using json = nlohmann::ordered_json;

double wire_logprob(float lp) {
  if (!std::isfinite(lp)) return -9999.0;
  return std::max<double>(lp, -9999.0);
}

json piece_json(const TokenPiece& p) {
  json j;
  j["token"] = valid_utf8(p.bytes);
  j["logprob"] = wire_logprob(p.logprob);
  j["bytes"] = utf8_bytes(p.bytes);
  return j;
}

}  // namespace

json render_chat_logprobs(std::span<const TokenLogprobs> tokens) {
  json content = json::array();
  for (const TokenLogprobs& t : tokens) {
    json entry = piece_json(t.chosen);
    json top = json::array();
    for (const TokenPiece& p : t.top) top.push_back(piece_json(p));
    entry["top_logprobs"] = std::move(top);
    content.push_back(std::move(entry));
  }
  json out;
  out["content"] = std::move(content);
  out["refusal"] = nullptr;
  return out;
}

json render_completion_logprobs(std::span<const TokenLogprobs> tokens, size_t& text_offset) {
  json token_texts = json::array(), token_logprobs = json::array(), top = json::array(),
       offsets = json::array();
  for (const TokenLogprobs& t : tokens) {
    const std::string text = valid_utf8(t.chosen.bytes);
    token_texts.push_back(text);
    token_logprobs.push_back(wire_logprob(t.chosen.logprob));
    json alternatives = json::object();
    for (const TokenPiece& p : t.top) alternatives[valid_utf8(p.bytes)] = wire_logprob(p.logprob);
    // OpenAI: the sampled token is always among them (up to logprobs + 1 entries).
    if (!alternatives.contains(text)) alternatives[text] = wire_logprob(t.chosen.logprob);
    top.push_back(std::move(alternatives));
    offsets.push_back(text_offset);
    text_offset += code_point_count(t.chosen.bytes);
  }
  json out;
  out["tokens"] = std::move(token_texts);
  out["token_logprobs"] = std::move(token_logprobs);
  out["top_logprobs"] = std::move(top);
  out["text_offset"] = std::move(offsets);
  return out;
}

}  // namespace spillway::api
