// `triad template render`: renders a chat template (a .jinja file, or a GGUF model's
// tokenizer.chat_template) with a JSON context, as the server will for a request. Used by the
// template tests against Python's jinja2 and handy for checking a --chat-template-file.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>

#include "base/error.h"
#include "commands.h"
#include "gguf/gguf_file.h"
#include "template/template.h"

namespace triad::app {
namespace {

std::string read_all(std::istream& in) {
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string template_source(const std::string& path) {
  if (path.size() > 5 && path.compare(path.size() - 5, 5, ".gguf") == 0) {
    auto f = gguf::GgufFile::open(path);
    const gguf::Value* v = f->find("tokenizer.chat_template");
    TRIAD_CHECK(v != nullptr && v->type == gguf::ValueType::kString, path,
                " has no tokenizer.chat_template string");
    return v->str;
  }
  std::ifstream f(path, std::ios::binary);
  TRIAD_CHECK(f.good(), "cannot read ", path);
  return read_all(f);
}

}  // namespace

Command add_template(CLI::App& app) {
  struct Opt {
    std::string tmpl, context;
  };
  auto o = std::make_shared<Opt>();  // owned by the returned command
  CLI::App* t = app.add_subcommand("template", "chat template tools");
  t->require_subcommand(1);
  CLI::App* cmd = t->add_subcommand("render", "render a chat template with a JSON context (messages, ...)");
  cmd->add_option("-t,--template", o->tmpl, "a .jinja file, or a .gguf model with tokenizer.chat_template")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("-c,--context", o->context, "JSON file with the variables (default: standard input)");
  return [o] {
    std::string ctx_text;
    if (o->context.empty() || o->context == "-") {
      ctx_text = read_all(std::cin);
    } else {
      std::ifstream f(o->context, std::ios::binary);
      TRIAD_CHECK(f.good(), "cannot read ", o->context);
      ctx_text = read_all(f);
    }
    nlohmann::ordered_json ctx;
    try {
      ctx = nlohmann::ordered_json::parse(ctx_text);
    } catch (const nlohmann::json::exception& e) {
      fail("the context is not valid JSON: ", e.what());
    }
    tmpl::Template tpl(template_source(o->tmpl));
    const std::string out = tpl.render(ctx);
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
  };
}

}  // namespace triad::app
