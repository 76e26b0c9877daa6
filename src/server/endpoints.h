// What the endpoint handlers share, internal to src/server: the model a request names, the
// queue check, and chat prompts: OpenAI chat messages (checked here, each problem a 400 naming
// the message) and the request's tools rendered by the model's chat template (or its built-in
// chat format) into prompt token ids; and the constraint that tools put on decoding.
// Thread-safety: pure functions of their arguments (check_capacity reads the engine's stats).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "server/openai_request.h"
#include "server/service.h"
#include "server/tool_calls.h"

namespace triad::grammar {
class Constraint;
}

namespace triad::server {

// The request's model name; a request without one goes to `fallback` (--default-model) when
// that is set, else it is a 400.
std::string model_name_of(const json& body, const std::string& fallback);
// The model, or a 404 in OpenAI's words for the name the body gives.
ServedModel& model_or_404(ServedModel* m, const json& body);
// The same for the text endpoints: an embedding model is a 400 naming "model".
ServedModel& generative_model_or_4xx(ServedModel* m, const json& body, const char* endpoint);
// A 503 (with Retry-After) when the `n` engine requests a request queues (an embeddings request:
// one per input) do not fit in `max_queue` beside those already waiting for the model; one
// larger than the whole queue is let in only when nothing waits.
void check_capacity(const ServedModel& m, int max_queue, size_t n = 1);

// `msgs`: the chat `messages` array; `param` names it in errors. Listed tools are shown to the
// model (the template renders them, or a system message describes them), whatever tool_choice
// says. `template_kwargs`: chat_template_kwargs (or null).
std::vector<int32_t> chat_prompt(const ServedModel& m, const json& msgs, const ToolRequest& tools,
                                 const json* template_kwargs, const char* param = "messages");

// Sets the call grammar when the tools may be called (not under tool_choice "none", where the
// answer is text whatever it says). Throws ApiError when the request also asks for a response
// format or grammar, or a parameter schema does not compile.
void constrain_for_tools(GenOptions& opt, const ToolRequest& tools, ToolFormat format, std::vector<std::string>* dropped);

// Compiles the request's constraint, if it asks for one (a 400 naming its field when it does
// not compile). Schema keywords that non-strict schemas had to drop (with `dropped`, those of
// the tools) are named in the x-triad-schema-dropped header, which `w` then carries.
std::shared_ptr<grammar::Constraint> compile_constraint(ServedModel& m, const GenOptions& o, std::vector<std::string> dropped,
                                                        std::shared_ptr<ResponseWriter>& w);

}  // namespace triad::server
