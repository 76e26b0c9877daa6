// Tool calling: the output parser and the streaming splitter agree on calls and content, model
// output that is not a call stays text, and the tool grammar admits exactly well-formed calls.
#include <gtest/gtest.h>

#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "server/tool_calls.h"

using namespace triad::server;

namespace {

ToolRequest two_tools(const std::string& choice, bool parallel) {
  json body = json::parse(R"({"tools": [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string", "maxLength": 8}}, "required": ["city"], "additionalProperties": false}}},
    {"type": "function", "function": {"name": "add", "parameters": {"type": "object",
      "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}}]})");
  if (choice == "add") {
    body["tool_choice"] = json::parse(R"({"type": "function", "function": {"name": "add"}})");
  } else {
    body["tool_choice"] = choice;
  }
  body["parallel_tool_calls"] = parallel;
  return parse_tools(body);
}

bool grammar_accepts(const ToolRequest& t, const std::string& text) {
  using namespace triad::grammar;
  auto g = std::make_shared<const Grammar>(Grammar::from_gbnf(tool_grammar(t)));
  auto v = std::make_shared<const Vocab>(std::vector<std::string>{"</s>", "x"}, std::vector<char>{0, 1},
                                         std::vector<int32_t>{0});
  Matcher m(std::make_shared<Constraint>(g, v));
  return m.accept_bytes(text) && m.accepting();
}

const std::string kCallW = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
const std::string kCallA = "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": -2}}\n</tool_call>";

}  // namespace

TEST(ToolCalls, ParserSplitsTextAndCalls) {
  ParsedOutput p = parse_tool_output("Let me check.\n" + kCallW + "\n" + kCallA);
  EXPECT_EQ(p.content, "Let me check.");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(p.calls[0].arguments, R"({"city": "Paris"})");  // the model's own text
  EXPECT_EQ(p.calls[1].arguments, R"({"a": 1, "b": -2})");
  // Arguments given as a JSON string, and llama-style "parameters", are accepted too.
  p = parse_tool_output(R"(<tool_call>{"name": "f", "arguments": "{\"x\": 1}"}</tool_call>)");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].arguments, R"({"x":1})");
  // Not calls: bad JSON, no name, arguments not an object, unclosed, too deep.
  for (const std::string& bad : {std::string("<tool_call>{oops}</tool_call>"), std::string("<tool_call>{\"arguments\": {}}</tool_call>"),
                                std::string("<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>"),
                                std::string("<tool_call>{\"name\": \"f\""),
                                "<tool_call>{\"name\": \"f\", \"arguments\": " + std::string(100, '[') + std::string(100, ']') + "}</tool_call>"}) {
    p = parse_tool_output("a " + bad + " b");
    EXPECT_TRUE(p.calls.empty()) << bad;
    EXPECT_NE(p.content.find("a "), std::string::npos);
  }
}

TEST(ToolCalls, BareCallObjects) {
  const std::string bare = "{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}";
  ParsedOutput p = parse_tool_output("\n" + bare + "\n");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.content, "");
  for (size_t step = 1; step <= 7; ++step) {
    ToolStreamSplitter s;
    std::string content;
    const std::string text = " " + bare;
    for (size_t i = 0; i < text.size(); i += step) content += s.feed(std::string_view(text).substr(i, step));
    content += s.flush();
    EXPECT_EQ(content, "");
    EXPECT_EQ(s.take_calls().size(), 1u);
  }
  // A JSON answer that is not a call stays text, in the stream too.
  p = parse_tool_output("{\"answer\": 42}");
  EXPECT_TRUE(p.calls.empty());
  EXPECT_EQ(p.content, "{\"answer\": 42}");
  ToolStreamSplitter s;
  std::string content = s.feed("{\"answer\"");
  content += s.feed(": 42}");
  content += s.flush();
  EXPECT_EQ(content, "{\"answer\": 42}");
  EXPECT_TRUE(s.take_calls().empty());
}

TEST(ToolCalls, StreamingSplitterMatchesTheParser) {
  const std::string text = "Sure" + std::string(" <tool") + " x\n" + kCallW + "\n" + kCallA + "\n";
  for (size_t step = 1; step <= 9; ++step) {
    ToolStreamSplitter s;
    std::string content;
    std::vector<ToolCall> calls;
    for (size_t i = 0; i < text.size(); i += step) {
      content += s.feed(std::string_view(text).substr(i, step));
      for (auto& c : s.take_calls()) calls.push_back(c);
    }
    content += s.flush();
    EXPECT_EQ(content, "Sure <tool x\n") << step;  // the partial tag was held back, then released
    ASSERT_EQ(calls.size(), 2u) << step;
    EXPECT_EQ(calls[1].name, "add");
  }
}

TEST(ToolCalls, GrammarAdmitsWellFormedCallsOnly) {
  const ToolRequest req = two_tools("required", true);
  EXPECT_TRUE(grammar_accepts(req, kCallW));
  EXPECT_TRUE(grammar_accepts(req, kCallW + "\n" + kCallA));
  EXPECT_FALSE(grammar_accepts(req, "hello"));
  EXPECT_FALSE(grammar_accepts(req, "<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(grammar_accepts(req, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Amsterdam!\"}}\n</tool_call>"));
  const ToolRequest single = two_tools("required", false);
  EXPECT_TRUE(grammar_accepts(single, kCallA));
  EXPECT_FALSE(grammar_accepts(single, kCallA + "\n" + kCallA));
  const ToolRequest named = two_tools("add", true);
  EXPECT_TRUE(grammar_accepts(named, kCallA));
  EXPECT_FALSE(grammar_accepts(named, kCallW));
  const ToolRequest automatic = two_tools("auto", true);
  EXPECT_TRUE(grammar_accepts(automatic, "Just text, no call. a < b"));
  EXPECT_TRUE(grammar_accepts(automatic, "Checking: " + kCallW));
  EXPECT_TRUE(grammar_accepts(automatic, ""));
  EXPECT_FALSE(grammar_accepts(automatic, "text <tool_call>\n{\"name\": \"nope\"}"));
  EXPECT_FALSE(grammar_accepts(automatic, kCallW + " and more text"));
  EXPECT_FALSE(two_tools("none", true).active());
  // auto: an answer opening with "{" is one bare call object, held to the tools' schemas.
  EXPECT_TRUE(grammar_accepts(automatic, "{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}"));
  EXPECT_FALSE(grammar_accepts(automatic, "{\"name\": \"add\", \"arguments\": {\"a\": \"x\", \"b\": 2}}"));
  EXPECT_FALSE(grammar_accepts(automatic, "{\"answer\": 42}"));
  EXPECT_TRUE(grammar_accepts(automatic, "The answer is {42}."));
}

TEST(ToolCalls, StreamedArgumentsArriveInFragments) {
  // Byte by byte, a canonical call streams its name as soon as it is closed and its arguments
  // as they are written; the fragments add up to the finished call's arguments, which are the
  // model's own text.
  const std::string text = "Ok. " + kCallW + "\n" + kCallA;
  ToolStreamSplitter s;
  std::vector<CallEvent> ev;
  size_t begin_at = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    (void)s.feed(std::string_view(text).substr(i, 1));
    for (CallEvent& e : s.take_events()) {
      if (e.kind == CallEvent::kBegin && ev.empty()) begin_at = i;
      ev.push_back(std::move(e));
    }
  }
  (void)s.flush();
  for (CallEvent& e : s.take_events()) ev.push_back(std::move(e));
  EXPECT_EQ(begin_at, text.find("\"get_weather\"") + std::string("\"get_weather\"").size() - 1);
  std::vector<std::string> names, args;
  std::string cur;
  int fragments = 0;
  for (const CallEvent& e : ev) {
    if (e.kind == CallEvent::kBegin) names.push_back(e.text), cur.clear();
    if (e.kind == CallEvent::kArgs) cur += e.text, ++fragments;
    if (e.kind == CallEvent::kEnd) {
      EXPECT_EQ(cur, e.text);
      args.push_back(e.text);
    }
    EXPECT_NE(e.kind, CallEvent::kAbandon);
  }
  ASSERT_EQ(names, (std::vector<std::string>{"get_weather", "add"}));
  EXPECT_EQ(args, (std::vector<std::string>{"{\"city\": \"Paris\"}", "{\"a\": 1, \"b\": -2}"}));
  EXPECT_GT(fragments, 20);
  const ParsedOutput p = parse_tool_output(text);
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].arguments, args[0]);

  // A call cut off by the length limit streamed its start and is then abandoned, not repeated
  // as text.
  ToolStreamSplitter cut;
  std::string content = cut.feed("<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1");
  content += cut.flush();
  EXPECT_EQ(content, "");
  std::vector<CallEvent> ce = cut.take_events();
  ASSERT_EQ(ce.size(), 3u);
  EXPECT_EQ(ce[0].kind, CallEvent::kBegin);
  EXPECT_EQ(ce[1].text, "{\"a\": 1");
  EXPECT_EQ(ce[2].kind, CallEvent::kAbandon);
  EXPECT_TRUE(cut.take_calls().empty());
  // A call in another form (arguments first) is reported whole once complete.
  ToolStreamSplitter other;
  (void)other.feed("<tool_call>{\"arguments\": {\"a\": 1, \"b\": 2}, \"name\": \"add\"}</tool_call>");
  std::vector<CallEvent> oe = other.take_events();
  ASSERT_EQ(oe.size(), 3u);
  EXPECT_EQ(oe[0].text, "add");
  EXPECT_EQ(oe[1].text, "{\"a\":1,\"b\":2}");
  EXPECT_EQ(oe[2].kind, CallEvent::kEnd);
}
