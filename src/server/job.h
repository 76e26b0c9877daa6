// A chat or completions request in flight, internal to src/server: the service parses and
// checks a request, then hands it over here.
// Thread-safety: start_job() runs on an HTTP thread; the job's sinks then run on the engine's
// thread and its disconnect callback on the HTTP threads (a mutex orders them).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "server/openai_request.h"
#include "server/service.h"
#include "server/tool_calls.h"

namespace triad::server {

struct JobSpec {
  ServedModel* model = nullptr;
  std::shared_ptr<ResponseWriter> writer;
  bool chat = true;                             // chat.completion(.chunk) vs text_completion
  GenOptions opt;
  ToolRequest tools;                            // chat with tools: outputs become tool_calls
  std::vector<std::vector<int32_t>> prompts;    // one per prompt (completions may have several)
  std::vector<std::string> echo_text;           // completions with echo: the prompt texts
};

// Checks the prompts against the context and compiles the request's constraint (throwing
// ApiError, with nothing submitted, when either fails), starts the stream's headers, submits one
// engine request per choice and answers the client as they run.
void start_job(Service& svc, JobSpec spec);

}  // namespace triad::server
