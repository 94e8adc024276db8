// Fallback chat templates for models that ship none, per model family. Each is that
// family's published Hugging Face template for plain system / user / assistant turns,
// with two liberties: bos/eos tokens are printed or defaulted to "" instead of being
// concatenated (a model without them renders instead of failing), and families whose
// template rejects a system message (Gemma, Mistral v0.1/v0.2) fold it into the first or
// last user turn as their later templates do (Gemma 3, Mistral v0.3).
#include <string>

#include "api/chat_template.h"

namespace spillway::api {
namespace {

// transformers' historical default ChatML template (Qwen, Yi, Hermes, most fine-tunes).
constexpr const char* kChatml =
    "{% for message in messages %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

// Meta-Llama-3-8B-Instruct.
constexpr const char* kLlama3 =
    "{% set loop_messages = messages %}"
    "{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'"
    "+ message['content'] | trim + '<|eot_id|>' %}"
    "{% if loop.index0 == 0 %}{% set content = (bos_token or '') + content %}{% endif %}"
    "{{ content }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";

// Llama-2-7b-chat-hf.
constexpr const char* kLlama2 =
    "{% if messages[0]['role'] == 'system' %}"
    "{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}"
    "{% else %}"
    "{% set loop_messages = messages %}{% set system_message = false %}"
    "{% endif %}"
    "{% for message in loop_messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{% endif %}"
    "{% if loop.index0 == 0 and system_message != false %}"
    "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
    "{% else %}{% set content = message['content'] %}{% endif %}"
    "{% if message['role'] == 'user' %}"
    "{{ (bos_token or '') + '[INST] ' + content.strip() + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}"
    "{{ ' ' + content.strip() + ' ' + (eos_token or '') }}"
    "{% endif %}"
    "{% endfor %}";

// Mistral-7B-Instruct-v0.3 (system message folded into the last user turn).
constexpr const char* kMistral =
    "{%- if messages[0]['role'] == 'system' %}"
    "{%- set system_message = messages[0]['content'] %}"
    "{%- set loop_messages = messages[1:] %}"
    "{%- else %}"
    "{%- set loop_messages = messages %}"
    "{%- endif %}"
    "{{- bos_token }}"
    "{%- for message in loop_messages %}"
    "{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{- raise_exception('After the optional system message, conversation roles must alternate "
    "user/assistant/user/assistant/...') }}"
    "{%- endif %}"
    "{%- if message['role'] == 'user' %}"
    "{%- if loop.last and system_message is defined %}"
    "{{- '[INST] ' + system_message + '\\n\\n' + message['content'] + '[/INST]' }}"
    "{%- else %}"
    "{{- '[INST] ' + message['content'] + '[/INST]' }}"
    "{%- endif %}"
    "{%- elif message['role'] == 'assistant' %}"
    "{{- ' ' + message['content'] + (eos_token or '') }}"
    "{%- else %}"
    "{{- raise_exception('Only user and assistant roles are supported, with the exception of an "
    "initial optional system message!') }}"
    "{%- endif %}"
    "{%- endfor %}";

// google/gemma-2-2b-it, with Gemma 3's handling of a system message (prefixed to the
// first user turn).
constexpr const char* kGemma =
    "{{ bos_token }}"
    "{% if messages[0]['role'] == 'system' %}"
    "{% set first_user_prefix = messages[0]['content'] + '\\n\\n' %}{% set loop_messages = messages[1:] %}"
    "{% else %}"
    "{% set first_user_prefix = '' %}{% set loop_messages = messages %}"
    "{% endif %}"
    "{% for message in loop_messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{% endif %}"
    "{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}"
    "{{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else '') + message['content'] | trim + "
    "'<end_of_turn>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}";

// microsoft/Phi-3.5-mini-instruct.
constexpr const char* kPhi3 =
    "{% for message in messages %}"
    "{% if message['role'] == 'system' and message['content'] %}{{'<|system|>\\n' + message['content'] + '<|end|>\\n'}}"
    "{% elif message['role'] == 'user' %}{{'<|user|>\\n' + message['content'] + '<|end|>\\n'}}"
    "{% elif message['role'] == 'assistant' %}{{'<|assistant|>\\n' + message['content'] + '<|end|>\\n'}}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% else %}{{ eos_token }}{% endif %}";

}  // namespace

std::optional<std::string> builtin_chat_template(std::string_view family) {
  if (family == "chatml") return kChatml;
  if (family == "llama3") return kLlama3;
  if (family == "llama2") return kLlama2;
  if (family == "mistral") return kMistral;
  if (family == "gemma") return kGemma;
  if (family == "phi3") return kPhi3;
  return std::nullopt;
}

}  // namespace spillway::api
