// Built-in chat formats for the architectures Triad runs (the full Jinja chat-template engine
// arrives with the HTTP server). The format is detected from the vocabulary's special tokens,
// falling back to the GGUF chat template's text and then to the architecture.
#pragma once

#include <string>
#include <vector>

namespace triad {

class Tokenizer;

enum class ChatFormat {
  kNone,     // plain text, no wrapping
  kLlama2,   // [INST] ... [/INST]
  kLlama3,   // <|start_header_id|>role<|end_header_id|>\n\n ... <|eot_id|>
  kChatML,   // <|im_start|>role\n ... <|im_end|>\n   (qwen2, qwen3)
  kGemma,    // <start_of_turn>user\n ... <end_of_turn>\n<start_of_turn>model\n
};

struct ChatMessage {
  std::string role;  // "system", "user", "assistant"
  std::string content;
};

const char* chat_format_name(ChatFormat f);
// Picks the format for a model: its vocabulary's special tokens first, then the text of
// tokenizer.chat_template (may be empty), then the architecture name.
ChatFormat detect_chat_format(const Tokenizer& tok, const std::string& chat_template,
                              const std::string& arch);
// Renders the conversation followed by the opening of the assistant's turn. Special tokens are
// written as text: encode the result with parse_special = true. The BOS token is not included
// (the tokenizer adds it).
std::string render_chat(ChatFormat f, const std::vector<ChatMessage>& messages);

}  // namespace triad
