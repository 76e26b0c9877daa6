// A generation request in flight, internal to src/server: the service parses and checks a
// request and chooses its wire format (an Encoder), then hands it over here.
// Thread-safety: start_job() runs on an HTTP thread; the job's sinks then run on the engine's
// thread and its disconnect callback on the HTTP threads (a mutex orders them).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "server/encoder.h"
#include "server/openai_request.h"
#include "server/service.h"
#include "server/tool_calls.h"

namespace triad::server {

struct JobSpec {
  ServedModel* model = nullptr;
  std::shared_ptr<ResponseWriter> writer;
  std::unique_ptr<Encoder> encoder;             // the wire format
  GenOptions opt;
  std::shared_ptr<grammar::Constraint> constraint;  // compiled (compile_constraint), or null
  ToolRequest tools;                            // with active tools, outputs are split into calls
  std::vector<std::vector<int32_t>> prompts;    // one per prompt (completions may have several)
  bool completion_defaults = false;             // /v1/completions: 16 tokens unless max_tokens says
};

// Checks the prompts against the context (throwing ApiError, with nothing submitted, when one
// does not fit), starts the stream, submits one engine request per choice and reports to the
// encoder as they run. A disconnect cancels them.
void start_job(Service& svc, JobSpec spec);

}  // namespace triad::server
