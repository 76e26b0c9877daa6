#include "base/error.h"

namespace triad {

// Out of line on purpose: see error.h (fail_message) and kernels/isa_error.h.
void fail_message(const char* message) { throw Error(message); }

}  // namespace triad
