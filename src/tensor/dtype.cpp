#include "tensor/dtype.h"

#include "base/error.h"

namespace triad {
namespace {
struct Entry {
  uint32_t id;
  DTypeTraits traits;
  bool internal = false;  // not a GGUF type
};
constexpr Entry kTable[] = {
    {0, {"F32", 1, 4}},      {1, {"F16", 1, 2}},       {2, {"Q4_0", 32, 18}},
    {3, {"Q4_1", 32, 20}},   {6, {"Q5_0", 32, 22}},    {7, {"Q5_1", 32, 24}},
    {8, {"Q8_0", 32, 34}},   {9, {"Q8_1", 32, 36}},    {10, {"Q2_K", 256, 84}},
    {11, {"Q3_K", 256, 110}}, {12, {"Q4_K", 256, 144}}, {13, {"Q5_K", 256, 176}},
    {14, {"Q6_K", 256, 210}}, {15, {"Q8_K", 256, 292}}, {20, {"IQ4_NL", 32, 18}},
    {23, {"IQ4_XS", 256, 136}}, {24, {"I8", 1, 1}},
    {25, {"I16", 1, 2}},     {26, {"I32", 1, 4}},      {27, {"I64", 1, 8}},
    {28, {"F64", 1, 8}},     {30, {"BF16", 1, 2}},     {39, {"MXFP4", 32, 17}},
    {0x10001, {"FP8_E4M3", 1, 1}, true}, {0x10002, {"FP8_E5M2", 1, 1}, true},
};
}  // namespace

std::optional<DTypeTraits> dtype_traits(uint32_t type_id) {
  for (const Entry& e : kTable)
    if (e.id == type_id && !e.internal) return e.traits;
  return std::nullopt;
}

const DTypeTraits& traits(DType t) {
  for (const Entry& e : kTable)
    if (e.id == static_cast<uint32_t>(t)) return e.traits;
  fail("unknown dtype id ", static_cast<uint32_t>(t));
}

bool dtype_supported_for_weights(DType t) {
  switch (t) {
    case DType::kF32: case DType::kF16: case DType::kBF16: case DType::kQ8_0:
    case DType::kQ4_0: case DType::kQ4_1: case DType::kQ5_0: case DType::kQ5_1:
    case DType::kQ2_K: case DType::kQ3_K: case DType::kQ4_K: case DType::kQ5_K:
    case DType::kQ6_K: case DType::kIQ4_NL: case DType::kIQ4_XS: case DType::kMXFP4:
      return true;
    default:
      return false;
  }
}

bool dtype_has_row_scale(DType t) { return t == DType::kF8_E4M3 || t == DType::kI8; }

bool dtype_supported_for_matmul(DType t) {
  return dtype_supported_for_weights(t) || dtype_has_row_scale(t);
}

}  // namespace triad
