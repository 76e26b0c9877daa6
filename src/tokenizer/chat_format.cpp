#include "tokenizer/chat_format.h"

#include "tokenizer/tokenizer.h"

namespace triad {

const char* chat_format_name(ChatFormat f) {
  switch (f) {
    case ChatFormat::kNone: return "none";
    case ChatFormat::kLlama2: return "llama2";
    case ChatFormat::kLlama3: return "llama3";
    case ChatFormat::kChatML: return "chatml";
    case ChatFormat::kGemma: return "gemma";
  }
  return "?";
}

ChatFormat detect_chat_format(const Tokenizer& tok, const std::string& tmpl, const std::string& arch) {
  if (tok.find_token("<start_of_turn>")) return ChatFormat::kGemma;
  if (tok.find_token("<|im_start|>")) return ChatFormat::kChatML;
  if (tok.find_token("<|start_header_id|>")) return ChatFormat::kLlama3;
  if (tmpl.find("<start_of_turn>") != std::string::npos) return ChatFormat::kGemma;
  if (tmpl.find("<|im_start|>") != std::string::npos) return ChatFormat::kChatML;
  if (tmpl.find("[INST]") != std::string::npos) return ChatFormat::kLlama2;
  if (arch == "gemma3") return ChatFormat::kGemma;
  if (arch == "qwen2" || arch == "qwen3") return ChatFormat::kChatML;
  if (arch == "llama") return ChatFormat::kLlama2;
  return ChatFormat::kNone;
}

std::string render_chat(ChatFormat f, const std::vector<ChatMessage>& messages) {
  std::string out;
  switch (f) {
    case ChatFormat::kNone:
      for (const ChatMessage& m : messages) out += m.content + "\n";
      return out;
    case ChatFormat::kLlama2: {
      std::string system;
      bool first_user = true;
      for (const ChatMessage& m : messages) {
        if (m.role == "system") {
          system = "<<SYS>>\n" + m.content + "\n<</SYS>>\n\n";
        } else if (m.role == "user") {
          out += "[INST] " + (first_user ? system : std::string()) + m.content + " [/INST]";
          first_user = false;
        } else {
          out += " " + m.content + " </s><s>";
        }
      }
      return out;
    }
    case ChatFormat::kLlama3:
      for (const ChatMessage& m : messages)
        out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + m.content + "<|eot_id|>";
      return out + "<|start_header_id|>assistant<|end_header_id|>\n\n";
    case ChatFormat::kChatML:
      for (const ChatMessage& m : messages)
        out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      return out + "<|im_start|>assistant\n";
    case ChatFormat::kGemma: {
      // Gemma has no system role: a system message is prepended to the first user turn.
      std::string system;
      for (const ChatMessage& m : messages) {
        if (m.role == "system") {
          system += m.content + "\n\n";
          continue;
        }
        const std::string role = m.role == "assistant" ? "model" : "user";
        std::string content = m.content;
        if (role == "user" && !system.empty()) {
          content = system + content;
          system.clear();
        }
        out += "<start_of_turn>" + role + "\n" + content + "<end_of_turn>\n";
      }
      return out + "<start_of_turn>model\n";
    }
  }
  return out;
}

}  // namespace triad
