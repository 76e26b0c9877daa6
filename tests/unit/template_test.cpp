// Template engine: hostile templates and contexts fail fast with a TemplateError (never a
// crash, a hang, a stack overflow or a huge allocation); limits hold; rendering is reentrant.
// Feature-by-feature equivalence with Python's jinja2 lives in tests/templates (pytest).
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "template/template.h"

namespace triad::tmpl {
namespace {

using json = nlohmann::ordered_json;

std::string render(const std::string& src, const json& ctx = json::object(), Limits limits = {}) {
  return Template(src, limits).render(ctx);
}

// Runs f and checks that it throws a TemplateError containing `what`, within a second.
template <typename F>
void expect_error(F&& f, const std::string& what) {
  const auto t0 = std::chrono::steady_clock::now();
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing '" << what << "'";
  } catch (const TemplateError& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
  // A hang guard, not a speed check (the step budget is what stops a runaway loop; the error
  // text says so): a sanitizer build on a loaded machine takes about a second for 2M steps.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));
}

TEST(TemplateTest, RendersAChatConversation) {
  const std::string src =
      "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
      "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
  const json ctx = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"add_generation_prompt", true}};
  EXPECT_EQ(render(src, ctx), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

// A namespace that holds itself (or two that hold each other) is a reference cycle; the
// interpreter breaks it when the render ends, so nothing leaks (the ASan build checks).
TEST(TemplateTest, NamespaceCyclesDoNotLeak) {
  EXPECT_EQ(render("{% set ns = namespace(a=1) %}{% set ns.a = ns %}{% set other = namespace(x=ns) %}"
                   "{% set ns.b = other %}{% set other.y = ns %}{{ ns.a.a.b.x.a is defined }}"),
            "True");
  for (int i = 0; i < 3; ++i)  // and a failing render breaks them too
    EXPECT_THROW(render("{% set ns = namespace() %}{% set ns.s = ns %}{{ raise_exception('x') }}"), Error);
}

TEST(TemplateTest, SyntaxErrorsNameTheLine) {
  expect_error([] { render("line one\n{% if x %}\n{{ 1 + }}\n{% endif %}"); }, "line 3");
  expect_error([] { render("{% for x in y %}"); }, "endfor");
  expect_error([] { render("{{ 'abc"); }, "unclosed");
  expect_error([] { render("{% nope %}"); }, "unknown statement");
  expect_error([] { render("{{ a b }}"); }, "unexpected");
  expect_error([] { render("{% macro m( %}{% endmacro %}"); }, "expected");
}

TEST(TemplateTest, RaiseExceptionIsARequestError) {
  expect_error([] { render("{{ raise_exception('Conversation roles must alternate') }}"); }, "must alternate");
}

TEST(TemplateTest, DeepNestingIsRejectedNotOverflowingTheStack) {
  for (const std::string open : {"(", "[", "{'a':", "not ", "-"}) {
    std::string e;
    for (int i = 0; i < 20000; ++i) e += open;
    expect_error([&] { render("{{ " + e + "1 }}"); }, "nesting");
  }
  std::string ifs;
  for (int i = 0; i < 20000; ++i) ifs += "{% if true %}";
  expect_error([&] { render(ifs); }, "nest");
  // Left-deep chains are as tall as they are long: bounded too (evaluating or freeing a
  // 20,000-deep tree would exhaust the stack).
  std::string filters = "{{ 1", sum = "{{ 1", attrs = "{{ x";
  for (int i = 0; i < 20000; ++i) {
    filters += "|string";
    sum += " + 1";
    attrs += ".a";
  }
  for (std::string* t : {&filters, &sum, &attrs}) expect_error([&] { render(*t + " }}"); }, "nested deeper");
  // Moderate depth is fine.
  std::string ok = "{{ 0";
  for (int i = 0; i < 100; ++i) ok += " + 1";
  EXPECT_EQ(render(ok + " }}"), "100");
}

TEST(TemplateTest, RunawayRecursionAndLoopsStop) {
  expect_error([] { render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"); }, "nested deeper");
  expect_error([] { render("{% for i in range(1000000000000) %}{% endfor %}"); }, "range");
  expect_error([] {
    render("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}");
  }, "steps");
  Limits tight;
  tight.max_steps = 1000;
  expect_error([&] { render("{% for i in range(500) %}{{ i }}{% endfor %}", json::object(), tight); }, "steps");
}

TEST(TemplateTest, OutputAndStringsAreBounded) {
  expect_error([] { render("{{ 'x' * 1000000000000 }}"); }, "repetition");
  expect_error([] { render("{{ [1] * 1000000000000 }}"); }, "repetition");
  Limits small;
  small.max_output_bytes = 1000;
  expect_error([&] { render("{% for i in range(200) %}0123456789{% endfor %}", json::object(), small); }, "bytes");
  expect_error([&] { render("{% set s = 'ab' %}{% for i in range(20) %}{% set s = s ~ s %}{% endfor %}{{ s }}", json::object(), small); },
               "bytes");
  expect_error([&] { render("{{ 'a' | replace('', 'xyz' * 200) }}", json::object(), small); }, "");
}

TEST(TemplateTest, ArithmeticErrorsAreErrors) {
  expect_error([] { render("{{ 9223372036854775807 + 1 }}"); }, "overflow");
  expect_error([] { render("{{ -9223372036854775807 - 2 }}"); }, "overflow");
  expect_error([] { render("{{ 2 ** 64 }}"); }, "overflow");
  expect_error([] { render("{{ 1 // 0 }}"); }, "zero");
  expect_error([] { render("{{ 1 % 0 }}"); }, "zero");
  expect_error([] { render("{{ 1.0 / 0 }}"); }, "zero");
  expect_error([] { render("{{ range(1, 2, 0) }}"); }, "zero");
  expect_error([] { render("{{ 'a' + 1 }}"); }, "unsupported operand");
  expect_error([] { render("{{ 9999999999999999999999 }}"); }, "out of range");
}

TEST(TemplateTest, UndefinedBehavesLikeJinja2) {
  EXPECT_EQ(render("[{{ nothing }}][{{ nothing | default('d') }}][{{ nothing is defined }}]"), "[][d][False]");
  EXPECT_EQ(render("{% for x in nothing %}x{% else %}empty{% endfor %}"), "empty");
  expect_error([] { render("{{ nothing.attr }}"); }, "undefined");
  expect_error([] { render("{{ nothing() }}"); }, "undefined");
  expect_error([] { render("{{ nothing['k'] }}"); }, "undefined");
}

TEST(TemplateTest, TemplatesCannotModifyTheirInput) {
  const json ctx = {{"messages", json::array({1, 2})}, {"d", {{"a", 1}}}};
  expect_error([&] { render("{{ messages.append(3) }}", ctx); }, "unsafe");
  expect_error([&] { render("{{ messages.pop() }}", ctx); }, "unsafe");
  expect_error([&] { render("{{ d.update({'b': 2}) }}", ctx); }, "unsafe");
  expect_error([&] { render("{% set d.a = 2 %}", ctx); }, "namespace");
}

TEST(TemplateTest, BadContextIsAnError) {
  expect_error([] { Template("x").render(json::array({1})); }, "object");
}

TEST(TemplateTest, OneTemplateRendersOnManyThreadsAtOnce) {
  const Template t("{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + m %}{% endfor %}{{ ns.n }}");
  std::vector<std::thread> threads;
  std::vector<std::string> out(8);
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&, i] {
      json ctx = {{"messages", json::array()}};
      for (int k = 0; k <= i * 10; ++k) ctx["messages"].push_back(k);
      for (int r = 0; r < 200; ++r) out[i] = t.render(ctx);
    });
  for (auto& th : threads) th.join();
  for (int i = 0; i < 8; ++i) EXPECT_EQ(out[i], std::to_string((i * 10) * (i * 10 + 1) / 2));
}

TEST(TemplateTest, SourceSizeIsBounded) {
  Limits l;
  l.max_source_bytes = 100;
  expect_error([&] { Template(std::string(200, 'x'), l); }, "limit");
}

}  // namespace
}  // namespace triad::tmpl
