// The <think> splitter (server/reasoning.h): whole outputs and every two-piece split of them
// give the same reasoning and content; partial tags are held back, never leaked.
#include <gtest/gtest.h>

#include <string>

#include "server/reasoning.h"

namespace triad::server {
namespace {

struct Split {
  std::string reasoning, content;
  int thinking_pieces = 0;
};

Split run(bool inside, const std::vector<std::string>& pieces) {
  ReasoningSplitter s(inside);
  Split r;
  for (const std::string& p : pieces) {
    auto o = s.feed(p);
    r.reasoning += o.reasoning;
    r.content += o.content;
    r.thinking_pieces += o.thinking;
  }
  auto o = s.flush();
  r.reasoning += o.reasoning;
  r.content += o.content;
  return r;
}

struct Case {
  const char* text;
  bool inside;
  const char* reasoning;
  const char* content;
};

const Case kCases[] = {
    {"<think>\nLet me see.\n</think>\n\nParis.", false, "\nLet me see.\n", "Paris."},
    {"  \n<think>a</think>b", false, "a", "b"},
    {"Paris.", false, "", "Paris."},
    {"<thin", false, "", "<thin"},                             // not a tag after all: content
    {"<thinking> is a word", false, "", "<thinking> is a word"},
    {"x <think>y</think>", false, "", "x <think>y</think>"},    // not at the start: content
    {"<think>unfinished, cut by max_tokens", false, "unfinished, cut by max_tokens", ""},
    {"<think>a</thi", false, "a</thi", ""},                    // a partial close tag at the end
    {"so 1 < 2 and </think>\n\nYes", true, "so 1 < 2 and ", "Yes"},  // DeepSeek-R1: starts inside
    {"plain", true, "plain", ""},
    {"<think></think>", false, "", ""},
    {"<think>a</think>  </think>", false, "a", "</think>"},
    {"", false, "", ""},
};

TEST(ReasoningSplitter, EveryTwoPieceSplitAgreesWithTheWhole) {
  for (const Case& c : kCases) {
    const std::string t = c.text;
    SCOPED_TRACE(t);
    const Split whole = run(c.inside, {t});
    EXPECT_EQ(whole.reasoning, c.reasoning);
    EXPECT_EQ(whole.content, c.content);
    for (size_t k = 0; k <= t.size(); ++k) {
      const Split s = run(c.inside, {t.substr(0, k), t.substr(k)});
      EXPECT_EQ(s.reasoning, whole.reasoning) << "split at " << k;
      EXPECT_EQ(s.content, whole.content) << "split at " << k;
    }
    std::vector<std::string> bytes;
    for (char ch : t) bytes.emplace_back(1, ch);
    const Split b = run(c.inside, bytes);
    EXPECT_EQ(b.reasoning, whole.reasoning);
    EXPECT_EQ(b.content, whole.content);
  }
}

TEST(ReasoningSplitter, CountsThePiecesOfTheReasoning) {
  // Token pieces: "<think>", "a", "b", "</think>", "\n", "c": the first four are thinking.
  const Split s = run(false, {"<think>", "a", "b", "</think>", "\n", "c"});
  EXPECT_EQ(s.reasoning, "ab");
  EXPECT_EQ(s.content, "c");
  EXPECT_EQ(s.thinking_pieces, 4);
  EXPECT_EQ(run(false, {"no", " thinking"}).thinking_pieces, 0);
  EXPECT_EQ(run(true, {"x", "y", "</think>", "z"}).thinking_pieces, 3);
}

TEST(ReasoningSplitter, TemplateAndPromptDetection) {
  EXPECT_TRUE(ReasoningSplitter::template_thinks("{% if x %}<think>{% endif %}"));
  EXPECT_FALSE(ReasoningSplitter::template_thinks("{{ messages }}"));
  EXPECT_TRUE(ReasoningSplitter::prompt_opens_thinking("<|Assistant|><think>\n"));
  EXPECT_FALSE(ReasoningSplitter::prompt_opens_thinking("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(ReasoningSplitter::prompt_opens_thinking("<|im_start|>assistant\n"));
}

}  // namespace
}  // namespace triad::server
