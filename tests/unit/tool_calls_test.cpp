// Tool calling: the output parser and the streaming splitter agree on calls and content, model
// output that is not a call stays text, and the tool grammar admits exactly well-formed calls.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "server/reasoning.h"
#include "server/tool_calls.h"
#include "server/tool_formats.h"

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

bool grammar_accepts(const ToolRequest& t, const std::string& text, ToolFormat f = ToolFormat::kHermes) {
  using namespace triad::grammar;
  auto g = std::make_shared<const Grammar>(Grammar::from_gbnf(tool_grammar(t, f)));
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

// ---- the model families' formats (tool_formats.h) -------------------------------------------

namespace {

const std::string kDsSec = "<｜tool▁calls▁begin｜>", kDsSecEnd = "<｜tool▁calls▁end｜>", kDsOpen = "<｜tool▁call▁begin｜>",
                  kDsClose = "<｜tool▁call▁end｜>", kDsSep = "<｜tool▁sep｜>";

// Each format's text for: "Checking." then get_weather(city=Paris) and add(a=1, b=-2), as the
// family's chat template renders an assistant's calls.
std::string native_calls(ToolFormat f) {
  switch (f) {
    case ToolFormat::kHermes: return "Checking.\n" + kCallW + "\n" + kCallA;
    case ToolFormat::kDeepSeekV31:
      return "Checking." + kDsSec + kDsOpen + "get_weather" + kDsSep + R"({"city": "Paris"})" + kDsClose + kDsOpen + "add" +
             kDsSep + R"({"a": 1, "b": -2})" + kDsClose + kDsSecEnd;
    case ToolFormat::kDeepSeekR1:
      return "Checking." + kDsSec + kDsOpen + "function" + kDsSep + "get_weather\n```json\n" + R"({"city": "Paris"})" +
             "\n```" + kDsClose + "\n" + kDsOpen + "function" + kDsSep + "add\n```json\n" + R"({"a": 1, "b": -2})" + "\n```" +
             kDsClose + kDsSecEnd;
    case ToolFormat::kKimiK2:
      return "Checking.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
             R"({"city": "Paris"})"
             "<|tool_call_end|><|tool_call_begin|>functions.add:1<|tool_call_argument_begin|>"
             R"({"a": 1, "b": -2})"
             "<|tool_call_end|><|tool_calls_section_end|>";
    case ToolFormat::kGlm45:
      return "Checking.<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>\n"
             "<tool_call>add\n<arg_key>a</arg_key>\n<arg_value>1</arg_value>\n<arg_key>b</arg_key>\n<arg_value>-2</arg_value>\n"
             "</tool_call>";
    case ToolFormat::kQwen3Coder:
      return "Checking.<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>\n"
             "<tool_call>\n<function=add>\n<parameter=a>\n1\n</parameter>\n<parameter=b>\n-2\n</parameter>\n</function>\n"
             "</tool_call>";
    case ToolFormat::kHarmony: break;
  }
  return {};
}

const ToolFormat kRewritten[] = {ToolFormat::kDeepSeekV31, ToolFormat::kDeepSeekR1, ToolFormat::kKimiK2, ToolFormat::kGlm45,
                                 ToolFormat::kQwen3Coder};

void expect_two_calls(const std::vector<ToolCall>& calls, const std::string& where) {
  ASSERT_EQ(calls.size(), 2u) << where;
  EXPECT_EQ(calls[0].name, "get_weather") << where;
  EXPECT_EQ(json::parse(calls[0].arguments), json::parse(R"({"city": "Paris"})")) << where;
  EXPECT_EQ(calls[1].name, "add") << where;
  EXPECT_EQ(json::parse(calls[1].arguments), json::parse(R"({"a": 1, "b": -2})")) << where;
}

std::string read_template(const std::string& name) {
  const char* root = std::getenv("TRIAD_TESTDATA");
  if (!root || !*root) return {};
  std::ifstream in(std::string(root) + "/templates/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST(ToolFormats, DetectedFromTheFamiliesTemplates) {
  const std::pair<const char*, ToolFormat> cases[] = {
      {"deepseek-ai-DeepSeek-V3.1.jinja", ToolFormat::kDeepSeekV31},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", ToolFormat::kDeepSeekR1},
      {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", ToolFormat::kDeepSeekR1},
      {"Kimi-K2-Instruct.jinja", ToolFormat::kKimiK2},
      {"moonshotai-Kimi-K2.jinja", ToolFormat::kKimiK2},
      {"GLM-4.6.jinja", ToolFormat::kGlm45},
      {"Qwen3-Coder.jinja", ToolFormat::kQwen3Coder},
      {"openai-gpt-oss-120b.jinja", ToolFormat::kHarmony},
      {"Qwen-Qwen3-0.6B.jinja", ToolFormat::kHermes},
      {"Qwen-Qwen2.5-7B-Instruct.jinja", ToolFormat::kHermes},
      {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", ToolFormat::kHermes},
  };
  for (const auto& [file, want] : cases) {
    const std::string src = read_template(file);
    if (src.empty()) GTEST_SKIP() << "testdata templates not found (set TRIAD_TESTDATA)";
    EXPECT_EQ(tool_format_name(detect_tool_format(src)), std::string(tool_format_name(want))) << file;
  }
  EXPECT_TRUE(HarmonySplitter::template_is_harmony(read_template("openai-gpt-oss-120b.jinja")));
}

TEST(ToolFormats, NativeCallsReadAsTheCanonicalOnesWholeAndStreamed) {
  const ToolRequest req = two_tools("required", true);
  for (ToolFormat f : kRewritten) {
    const std::string text = native_calls(f);
    const std::string name = tool_format_name(f);
    // Whole.
    const ParsedOutput p = parse_tool_output(normalize_calls(f, text, &req), /*bare=*/false, /*sealed=*/true);
    EXPECT_EQ(p.content, "Checking.") << name;
    expect_two_calls(p.calls, name);
    // Streamed in every piece size: the same content and calls, arguments in fragments that add
    // up to them.
    for (size_t step = 1; step <= 9; ++step) {
      CallNormalizer n(f, &req);
      ToolStreamSplitter s(/*bare_calls=*/false, /*sealed=*/true);
      std::string content, args;
      std::vector<ToolCall> calls;
      for (size_t i = 0; i < text.size(); i += step) {
        content += s.feed(n.feed(std::string_view(text).substr(i, step)));
        for (auto& c : s.take_calls()) calls.push_back(c);
      }
      content += s.feed(n.flush());
      content += s.flush();
      for (auto& c : s.take_calls()) calls.push_back(c);
      for (const CallEvent& e : s.take_events()) EXPECT_NE(e.kind, CallEvent::kAbandon) << name;
      EXPECT_EQ(content, "Checking.") << name << " step " << step;
      expect_two_calls(calls, name + " step " + std::to_string(step));
    }
  }
}

TEST(ToolFormats, GrammarsAdmitTheirFormatOnly) {
  const ToolRequest req = two_tools("required", true), single = two_tools("required", false),
                    automatic = two_tools("auto", true), named = two_tools("add", true);
  for (ToolFormat f : kRewritten) {
    const std::string name = tool_format_name(f);
    const std::string text = native_calls(f);
    const std::string calls = text.substr(std::string("Checking.").size());
    EXPECT_TRUE(grammar_accepts(req, calls, f)) << name;
    EXPECT_TRUE(grammar_accepts(automatic, text, f)) << name;
    EXPECT_TRUE(grammar_accepts(automatic, "Just text. a < b <tool", f)) << name;
    EXPECT_FALSE(grammar_accepts(req, "Checking.", f)) << name;
    EXPECT_FALSE(grammar_accepts(single, calls, f)) << name;  // two calls, one allowed
    EXPECT_FALSE(grammar_accepts(named, calls, f)) << name;   // get_weather is not the named one
    EXPECT_FALSE(grammar_accepts(req, kCallW, f)) << name;    // the canonical form is not this family's
    // A wrong argument type is refused (a is an integer).
    std::string wrong = calls;
    const size_t at = wrong.find(f == ToolFormat::kDeepSeekV31 || f == ToolFormat::kDeepSeekR1 || f == ToolFormat::kKimiK2
                                     ? "\"a\": 1"
                                     : (f == ToolFormat::kGlm45 ? "<arg_value>1<" : "\n1\n"));
    ASSERT_NE(at, std::string::npos) << name;
    wrong[wrong.find('1', at)] = 'x';
    EXPECT_FALSE(grammar_accepts(req, wrong, f)) << name;
  }
  // Harmony: an optional analysis message, then the call (or, under auto, a final answer).
  const std::string call = " to=functions.add<|channel|>commentary json<|message|>{\"a\": 1, \"b\": 2}";
  const std::string analysis = "<|channel|>analysis<|message|>Adding 1 < 2.<|end|><|start|>assistant";
  const std::string final_answer = analysis + std::string("<|channel|>final<|message|>3");
  EXPECT_TRUE(grammar_accepts(req, call, ToolFormat::kHarmony));
  EXPECT_TRUE(grammar_accepts(req, analysis + call, ToolFormat::kHarmony));
  EXPECT_FALSE(grammar_accepts(req, final_answer, ToolFormat::kHarmony));
  EXPECT_TRUE(grammar_accepts(automatic, final_answer, ToolFormat::kHarmony));
  EXPECT_FALSE(grammar_accepts(named, " to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"x\"}",
                               ToolFormat::kHarmony));
}

TEST(ToolFormats, XmlValuesAreTypedByTheSchema) {
  json body = json::parse(R"({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
      "properties": {"s": {"type": "string"}, "n": {"type": "number"}, "o": {"type": "object"}, "b": {"type": "boolean"}}}}}]})");
  const ToolRequest req = parse_tools(body);
  const ParsedOutput p = parse_tool_output(
      normalize_calls(ToolFormat::kGlm45,
                      "<tool_call>f\n<arg_key>s</arg_key>\n<arg_value>42</arg_value>\n<arg_key>n</arg_key>\n<arg_value>4.5</arg_value>\n"
                      "<arg_key>o</arg_key>\n<arg_value>{\"k\": [1]}</arg_value>\n<arg_key>b</arg_key>\n<arg_value>true</arg_value>\n"
                      "</tool_call>",
                      &req),
      false, /*sealed=*/true);
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(json::parse(p.calls[0].arguments), json::parse(R"({"s": "42", "n": 4.5, "o": {"k": [1]}, "b": true})"));
  // Qwen3-Coder writes Python's True; a multi-line string keeps its inner newlines.
  const ParsedOutput q = parse_tool_output(
      normalize_calls(ToolFormat::kQwen3Coder,
                      "<tool_call>\n<function=f>\n<parameter=b>\nTrue\n</parameter>\n<parameter=s>\nline 1\nline 2\n</parameter>\n"
                      "</function>\n</tool_call>",
                      &req),
      false, /*sealed=*/true);
  ASSERT_EQ(q.calls.size(), 1u);
  EXPECT_EQ(json::parse(q.calls[0].arguments), json::parse(R"({"b": true, "s": "line 1\nline 2"})"));
  // The string parameter's raw text may contain "<" (code); the grammar admits it.
  json body2 = json::parse(R"({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
      "properties": {"s": {"type": "string"}}, "required": ["s"]}}}], "tool_choice": "required"})");
  const ToolRequest req2 = parse_tools(body2);
  EXPECT_TRUE(grammar_accepts(req2, "<tool_call>f\n<arg_key>s</arg_key>\n<arg_value>if a < b: x</arg_value>\n</tool_call>",
                              ToolFormat::kGlm45));
  EXPECT_FALSE(grammar_accepts(req2, "<tool_call>f\n</tool_call>", ToolFormat::kGlm45));  // s is required
}

TEST(ToolFormats, MalformedNativeCallsStayText) {
  const ToolRequest req = two_tools("auto", true);
  // A header with no arguments marker, an invalid name, an unclosed XML call, a non-object.
  const std::string cases[] = {
      kDsSec + kDsOpen + "no separator here" + kDsClose + kDsSecEnd + " after",
      kDsSec + kDsOpen + "bad name!" + kDsSep + "{}" + kDsClose + kDsSecEnd + " after",
      "<tool_call>get_weather\n<arg_key>city</arg_key>\n junk </tool_call> after",
      kDsSec + kDsOpen + "add" + kDsSep + "[1, 2]" + kDsClose + kDsSecEnd + " after",
  };
  const ToolFormat fs[] = {ToolFormat::kDeepSeekV31, ToolFormat::kDeepSeekV31, ToolFormat::kGlm45, ToolFormat::kDeepSeekV31};
  for (size_t k = 0; k < std::size(cases); ++k) {
    const ParsedOutput p = parse_tool_output(normalize_calls(fs[k], cases[k], &req), false, /*sealed=*/true);
    EXPECT_TRUE(p.calls.empty()) << k;
    EXPECT_NE(p.content.find("after"), std::string::npos) << k << ": " << p.content << " / " << normalize_calls(fs[k], cases[k], &req);
  }
  // A call cut off at the end of the output is neither text nor a call.
  for (ToolFormat f : kRewritten) {
    const std::string text = native_calls(f);
    for (const char* at : {"Pa", "-2"}) {
      const size_t cut = text.find(at) + 2;
      const ParsedOutput p = parse_tool_output(normalize_calls(f, text.substr(0, cut), &req), false, /*sealed=*/true);
      EXPECT_EQ(p.calls.size(), at[0] == 'P' ? 0u : 1u) << tool_format_name(f) << " " << cut;
      EXPECT_EQ(p.content, "Checking.") << tool_format_name(f) << " " << cut;
    }
    // Ended after the arguments, before the close marker: the call is whole.
    const size_t last = text.rfind("-2") + 3;
    EXPECT_EQ(parse_tool_output(normalize_calls(f, text.substr(0, last), &req), false, /*sealed=*/true).calls.size(),
              f == ToolFormat::kGlm45 || f == ToolFormat::kQwen3Coder ? 1u : 2u) << tool_format_name(f);
  }
  // Any bytes, in any split: no crash, and the same output whole or byte by byte.
  std::string junk;
  for (int i = 0; i < 2000; ++i) junk += static_cast<char>((i * 7919) % 251);
  for (ToolFormat f : kRewritten) {
    const std::string text = native_calls(f).substr(0, 60) + junk + native_calls(f);
    CallNormalizer n(f, &req);
    std::string piecewise;
    for (char c : text) piecewise += n.feed(std::string_view(&c, 1));
    piecewise += n.flush();
    EXPECT_EQ(piecewise, normalize_calls(f, text, &req)) << tool_format_name(f);
  }
}

TEST(ToolFormats, HarmonyChannelsSplitIntoReasoningContentAndCalls) {
  auto run = [](const std::string& text, size_t step) {
    HarmonySplitter h;
    ChannelSplitter::Out all;
    for (size_t i = 0; i < text.size(); i += step) {
      ChannelSplitter::Out o = h.feed(std::string_view(text).substr(i, step));
      all.reasoning += o.reasoning;
      all.content += o.content;
    }
    ChannelSplitter::Out o = h.flush();
    all.reasoning += o.reasoning;
    all.content += o.content;
    return all;
  };
  for (size_t step : {1, 2, 3, 5, 64}) {
    ChannelSplitter::Out a = run("<|channel|>analysis<|message|>The user greets.<|end|><|start|>assistant<|channel|>final<|message|>Hello!", step);
    EXPECT_EQ(a.reasoning, "The user greets.");
    EXPECT_EQ(a.content, "Hello!");
    // Both header orders of a call; the <|call|> that ends it may or may not be in the text.
    for (const std::string& call :
         {std::string("<|channel|>analysis<|message|>Need it.<|end|><|start|>assistant to=functions.add<|channel|>commentary json<|message|>{\"a\": 1, \"b\": -2}"),
          std::string("<|channel|>commentary to=functions.add <|constrain|>json<|message|>{\"a\": 1, \"b\": -2}<|call|>")}) {
      ChannelSplitter::Out c = run(call, step);
      const ParsedOutput p = parse_tool_output(c.content, false, /*sealed=*/true);
      ASSERT_EQ(p.calls.size(), 1u) << c.content;
      EXPECT_EQ(p.calls[0].name, "add");
      EXPECT_EQ(json::parse(p.calls[0].arguments), json::parse(R"({"a": 1, "b": -2})"));
      EXPECT_EQ(p.content, "");
    }
    // A call cut off before its JSON closes is not a call.
    ChannelSplitter::Out cut = run(" to=functions.add<|channel|>commentary json<|message|>{\"a\": 1", step);
    EXPECT_TRUE(parse_tool_output(cut.content, false, /*sealed=*/true).calls.empty());
    // Output without harmony headers is content.
    EXPECT_EQ(run("Plain answer.", step).content, "Plain answer.");
  }
}

TEST(ToolFormats, OnlyCallsInTheFamilysSyntaxAreCalls) {
  const ToolRequest req = two_tools("auto", true);
  // A DeepSeek model's answer that shows the canonical form (or the seal byte) is text.
  const std::string shown = "Use <tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call> \x1E<tool_call>";
  for (ToolFormat f : {ToolFormat::kDeepSeekV31, ToolFormat::kKimiK2}) {
    const ParsedOutput p = parse_tool_output(normalize_calls(f, shown, &req), false, /*sealed=*/true);
    EXPECT_TRUE(p.calls.empty()) << tool_format_name(f);
    EXPECT_EQ(p.content, "Use <tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call> \xEF\xBF\xBD<tool_call>");
  }
  // A call marker outside a section is text; a section close with none open is text too.
  const std::string loose = "a " + kDsOpen + "add" + kDsSep + R"({"a": 1, "b": 2})" + kDsClose + " b" + kDsSecEnd;
  const ParsedOutput p = parse_tool_output(normalize_calls(ToolFormat::kDeepSeekV31, loose, &req), false, true);
  EXPECT_TRUE(p.calls.empty());
  EXPECT_EQ(p.content, loose);
  // A harmony final answer showing the canonical form is text.
  HarmonySplitter h;
  ChannelSplitter::Out o = h.feed("<|channel|>final<|message|>" + shown);
  ChannelSplitter::Out of = h.flush();
  EXPECT_TRUE(parse_tool_output(o.content + of.content, false, true).calls.empty());
}

TEST(ToolFormats, XmlStringValuesMayHoldTheCloseMarker) {
  // Code written by a tool call may contain "</tool_call>": the call ends at the first close
  // marker outside a value.
  json body = json::parse(R"({"tools": [{"type": "function", "function": {"name": "write", "parameters": {"type": "object",
      "properties": {"path": {"type": "string"}, "text": {"type": "string"}}}}}]})");
  const ToolRequest req = parse_tools(body);
  const std::string code = "print('</tool_call>')\n</function>";
  const std::pair<ToolFormat, std::string> cases[] = {
      {ToolFormat::kQwen3Coder, "<tool_call>\n<function=write>\n<parameter=path>\na.py\n</parameter>\n<parameter=text>\n" + code +
                                    "\n</parameter>\n</function>\n</tool_call> done"},
      {ToolFormat::kGlm45, "<tool_call>write\n<arg_key>path</arg_key>\n<arg_value>a.py</arg_value>\n<arg_key>text</arg_key>\n"
                           "<arg_value>" + code + "</arg_value>\n</tool_call> done"},
  };
  for (const auto& [f, text] : cases) {
    for (size_t step : {size_t{1}, size_t{3}, text.size()}) {
      CallNormalizer n(f, &req);
      std::string norm;
      for (size_t i = 0; i < text.size(); i += step) norm += n.feed(std::string_view(text).substr(i, step));
      norm += n.flush();
      const ParsedOutput p = parse_tool_output(norm, false, true);
      ASSERT_EQ(p.calls.size(), 1u) << tool_format_name(f) << " " << step;
      EXPECT_EQ(json::parse(p.calls[0].arguments), (json{{"path", "a.py"}, {"text", code}})) << tool_format_name(f);
      EXPECT_EQ(p.content, "done");
    }
  }
  // A schema whose string enum holds other values compiles (they are left out: no string matches them).
  json body2 = json::parse(R"({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
      "properties": {"s": {"type": "string", "enum": ["a", null, 3]}, "c": {"type": "string", "const": 1}}}}}]})");
  EXPECT_NO_THROW(tool_grammar(parse_tools(body2), ToolFormat::kGlm45));
}

TEST(ToolFormats, HarmonyEdges) {
  // Text after a message's end with no header is the answer.
  HarmonySplitter h;
  ChannelSplitter::Out a = h.feed("<|channel|>analysis<|message|>x<|end|>The answer");
  ChannelSplitter::Out af = h.flush();
  EXPECT_EQ(a.reasoning + af.reasoning, "x");
  EXPECT_EQ(a.content + af.content, "The answer");
  // --reasoning-format none: the analysis is content, calls are still read.
  HarmonySplitter n(/*split_reasoning=*/false);
  ChannelSplitter::Out b = n.feed("<|channel|>analysis<|message|>Think.<|end|><|start|>assistant to=functions.add<|channel|>commentary json"
                                  "<|message|>{\"a\": 1, \"b\": 2}");
  ChannelSplitter::Out bf = n.flush();
  EXPECT_EQ(b.reasoning + bf.reasoning, "");
  const ParsedOutput p = parse_tool_output(b.content + bf.content, false, true);
  EXPECT_EQ(p.content, "Think.");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "add");
}
