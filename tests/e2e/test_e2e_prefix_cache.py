"""The second turn of a conversation reuses the first turn's KV blocks: usage reports
cached_tokens > 0 and the prefix-cache hit counter rises by as much."""
from spillway_e2e import ServerTestCase, main

SYSTEM = ("You are a storyteller. You tell short, happy stories about children, animals and "
          "their friends, with a little lesson at the end. Keep the words simple.")


class PrefixCache(ServerTestCase):

    def chat(self, messages):
        status, _, body = self.server.post_json("/v1/chat/completions", {
            "model": "stories260K", "messages": messages, "max_tokens": 24, "temperature": 0})
        self.assertEqual(status, 200, body)
        return body

    def test_second_turn_hits_the_prefix_cache(self):
        messages = [{"role": "system", "content": SYSTEM},
                    {"role": "user", "content": "Tell me a story about a cat and a dog."}]
        first = self.chat(messages)
        self.assertGreater(first["usage"]["prompt_tokens"], 32)
        hits_before = self.server.metric("spillway_prefix_cache_hit_tokens_total")
        queried_before = self.server.metric("spillway_prefix_cache_queried_tokens_total")

        messages += [{"role": "assistant", "content": first["choices"][0]["message"]["content"]},
                     {"role": "user", "content": "Now tell me one about a bird."}]
        second = self.chat(messages)
        cached = second["usage"]["prompt_tokens_details"]["cached_tokens"]
        self.assertGreater(cached, 0)
        self.assertLess(cached, second["usage"]["prompt_tokens"])
        hits_after = self.server.metric("spillway_prefix_cache_hit_tokens_total")
        self.assertGreaterEqual(hits_after - hits_before, cached)
        self.assertGreater(self.server.metric("spillway_prefix_cache_queried_tokens_total"), queried_before)


if __name__ == "__main__":
    main()
