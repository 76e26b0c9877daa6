// Safetensors reader (safetensors.h).
#include "safetensors/safetensors.h"


#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/mapped_file.h"
#include "gguf/inspect.h"
#include "tensor/fp16.h"
#include "tensor/fp8.h"

namespace triad::safetensors {
namespace {

using json = nlohmann::json;

std::string q(std::string_view s) { return gguf::quote_bytes(s, 120, '\''); }

struct DTypeInfo {
  const char* name;
  DType type;
  size_t size;
};
constexpr DTypeInfo kDTypes[] = {
    {"F64", DType::kF64, 8},  {"F32", DType::kF32, 4},         {"F16", DType::kF16, 2},
    {"BF16", DType::kBF16, 2}, {"I64", DType::kI64, 8},        {"I32", DType::kI32, 4},
    {"I16", DType::kI16, 2},  {"I8", DType::kI8, 1},           {"U8", DType::kU8, 1},
    {"BOOL", DType::kBool, 1}, {"F8_E4M3", DType::kF8E4M3, 1}, {"F8_E5M2", DType::kF8E5M2, 1},
};

json parse_json(std::string_view text, int max_depth, const char* what) {
  if (json_nesting(text) > max_depth) fail(what, " nests deeper than ", max_depth, " levels");
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) fail(what, " is not valid JSON");
  return j;
}

uint64_t read_u64le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

bool plain_file_name(const std::string& n) {
  return !n.empty() && n.size() <= 255 && n.find('/') == std::string::npos && n.find('\\') == std::string::npos &&
         n != "." && n != ".." && n.find('\0') == std::string::npos;
}

}  // namespace

int json_nesting(std::string_view s) {
  int depth = 0, most = 0;
  bool in_str = false, esc = false;
  for (char c : s) {
    if (in_str) {
      if (esc) esc = false;
      else if (c == '\\') esc = true;
      else if (c == '"') in_str = false;
    } else if (c == '"') {
      in_str = true;
    } else if (c == '{' || c == '[') {
      most = std::max(most, ++depth);
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return most;
}

const char* dtype_name(DType t) {
  for (const DTypeInfo& d : kDTypes)
    if (d.type == t) return d.name;
  return "?";
}

size_t dtype_size(DType t) {
  for (const DTypeInfo& d : kDTypes)
    if (d.type == t) return d.size;
  return 0;
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->map_ = std::make_unique<MappedFile>(path, "safetensors", q(path));
  f->base_ = f->map_->data();
  f->size_ = f->map_->size();
  f->path_ = path;
  f->parse();
  return f;
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::from_bytes(const uint8_t* data, size_t size) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  if (size > 0) f->owned_.assign(data, data + size);
  f->base_ = f->owned_.data();
  f->size_ = size;
  f->parse();
  return f;
}

SafetensorsFile::~SafetensorsFile() = default;

const Tensor* SafetensorsFile::find(std::string_view name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

void SafetensorsFile::parse() {
  const std::string where = "safetensors " + q(path_) + ": ";
  if (size_ < 8) fail(where, "the file is ", size_, " bytes, shorter than the 8-byte header length");
  const uint64_t n = read_u64le(base_);
  if (n > kMaxHeaderBytes) fail(where, "header length ", n, " is over the ", kMaxHeaderBytes, "-byte bound");
  if (n > size_ - 8) fail(where, "header length ", n, " runs past the end of the file (", size_, " bytes)");
  if (n < 2 || base_[8] != '{')
    fail(where, "the header does not start with '{' (not a safetensors file?)");
  const std::string_view text(reinterpret_cast<const char*>(base_ + 8), n);
  json h;
  try {
    h = parse_json(text, 4, "the header");
  } catch (const Error& e) {
    fail(where, e.what());
  }
  if (!h.is_object()) fail(where, "the header is not a JSON object");
  const uint64_t data_size = size_ - 8 - n;
  const uint8_t* data = base_ + 8 + n;
  struct Range {
    uint64_t begin, end;
    size_t index;
  };
  std::vector<Range> ranges;
  for (const auto& [key, v] : h.items()) {
    if (key == "__metadata__") {
      if (!v.is_object()) fail(where, "__metadata__ is not an object");
      for (const auto& [mk, mv] : v.items()) {
        if (!mv.is_string()) fail(where, "__metadata__ value ", q(mk), " is not a string");
        metadata_[mk] = mv.get<std::string>();
      }
      continue;
    }
    const std::string at = where + "tensor " + q(key) + ": ";
    if (!v.is_object()) fail(at, "its entry is not an object");
    Tensor t;
    t.name = key;
    if (!v.contains("dtype") || !v["dtype"].is_string()) fail(at, "no string 'dtype'");
    const std::string dt = v["dtype"].get<std::string>();
    const DTypeInfo* info = nullptr;
    for (const DTypeInfo& d : kDTypes)
      if (dt == d.name) info = &d;
    if (!info) fail(at, "unsupported dtype ", q(dt));
    t.dtype = info->type;
    if (!v.contains("shape") || !v["shape"].is_array()) fail(at, "no array 'shape'");
    if (v["shape"].size() > kMaxDims) fail(at, "shape has ", v["shape"].size(), " dimensions (at most ", kMaxDims, ")");
    uint64_t count = 1;
    bool overflow = false;
    for (const json& d : v["shape"]) {
      if (!d.is_number_unsigned()) fail(at, "shape entries must be non-negative integers");
      const uint64_t dim = d.get<uint64_t>();
      if (dim > (uint64_t{1} << 62)) overflow = true;
      t.shape.push_back(static_cast<int64_t>(dim));
      if (!overflow && dim != 0 && count > UINT64_MAX / dim) overflow = true;
      if (!overflow) count *= dim;
    }
    if (overflow || count > UINT64_MAX / info->size) fail(at, "the shape's byte size overflows");
    t.n_elements = count;
    t.n_bytes = count * info->size;
    if (!v.contains("data_offsets") || !v["data_offsets"].is_array() || v["data_offsets"].size() != 2 ||
        !v["data_offsets"][0].is_number_unsigned() || !v["data_offsets"][1].is_number_unsigned())
      fail(at, "'data_offsets' must be two non-negative integers");
    const uint64_t b = v["data_offsets"][0].get<uint64_t>(), e = v["data_offsets"][1].get<uint64_t>();
    if (b > e || e > data_size)
      fail(at, "data_offsets [", b, ", ", e, "] are outside the data section (", data_size, " bytes)");
    if (e - b != t.n_bytes)
      fail(at, "data_offsets cover ", e - b, " bytes but the shape needs ", t.n_bytes, " (", dt, ")");
    t.data = data + b;
    ranges.push_back({b, e, tensors_.size()});
    tensors_.push_back(std::move(t));
  }
  // The ranges tile the data section: sorted, no overlap, no hole (the reference's rule).
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expect = 0;
  for (const Range& r : ranges) {
    const std::string& nm = tensors_[r.index].name;
    if (r.begin < expect) fail(where, "tensor ", q(nm), " overlaps the previous tensor's bytes");
    if (r.begin > expect) fail(where, "a hole of ", r.begin - expect, " bytes before tensor ", q(nm));
    expect = r.end;
  }
  if (expect != data_size) fail(where, "the data section has ", data_size - expect, " bytes after the last tensor");
  std::vector<Tensor> ordered;
  ordered.reserve(tensors_.size());
  for (const Range& r : ranges) ordered.push_back(std::move(tensors_[r.index]));
  tensors_ = std::move(ordered);
  for (size_t i = 0; i < tensors_.size(); ++i) by_name_.emplace(tensors_[i].name, i);
}

std::map<std::string, std::string> parse_shard_index(std::string_view text) {
  if (text.size() > kMaxHeaderBytes) fail("safetensors index: over ", kMaxHeaderBytes, " bytes");
  const json j = parse_json(text, 4, "safetensors index");
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    fail("safetensors index: no 'weight_map' object");
  std::map<std::string, std::string> out;
  for (const auto& [name, file] : j["weight_map"].items()) {
    if (!file.is_string()) fail("safetensors index: the file of tensor ", q(name), " is not a string");
    const std::string f = file.get<std::string>();
    if (!plain_file_name(f)) fail("safetensors index: tensor ", q(name), " names the file ", q(f), ", not a plain file name");
    out[name] = f;
  }
  return out;
}

std::unique_ptr<Checkpoint> Checkpoint::open_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  auto c = std::make_unique<Checkpoint>();
  const fs::path root(dir);
  const fs::path index = root / "model.safetensors.index.json";
  std::error_code ec;
  std::map<std::string, std::string> map;
  std::vector<std::string> files;
  if (fs::exists(index, ec)) {
    if (!fs::is_regular_file(index, ec) || fs::file_size(index, ec) > kMaxHeaderBytes)
      fail("safetensors: ", q(index.string()), " is not a regular file of at most ", kMaxHeaderBytes, " bytes");
    std::ifstream in(index, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    try {
      map = parse_shard_index(ss.str());
    } catch (const Error& e) {
      fail(q(index.string()), ": ", e.what());
    }
    for (const auto& [name, f] : map)
      if (std::find(files.begin(), files.end(), f) == files.end()) files.push_back(f);
  } else if (fs::exists(root / "model.safetensors", ec)) {
    files.push_back("model.safetensors");
  } else {
    fail("safetensors: ", q(dir), " has neither model.safetensors nor model.safetensors.index.json");
  }
  for (const std::string& f : files) {
    c->files_.push_back(SafetensorsFile::open((root / f).string()));
    for (const Tensor& t : c->files_.back()->tensors()) {
      if (!c->by_name_.emplace(t.name, &t).second)
        fail("safetensors: tensor ", q(t.name), " is in two shards of ", q(dir), " (again in ", q(f), ")");
    }
  }
  for (const auto& [name, f] : map) {
    const auto it = c->by_name_.find(name);
    if (it == c->by_name_.end()) fail("safetensors: the index of ", q(dir), " puts tensor ", q(name), " in ", q(f), ", which lacks it");
  }
  return c;
}

const Tensor* Checkpoint::find(std::string_view name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

std::vector<const Tensor*> Checkpoint::tensors() const {
  std::vector<const Tensor*> out;
  for (const auto& f : files_)
    for (const Tensor& t : f->tensors()) out.push_back(&t);
  return out;
}

namespace {

float element_f32(const Tensor& t, uint64_t i) {
  const uint8_t* p = t.data + i * dtype_size(t.dtype);
  switch (t.dtype) {
    case DType::kF32: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::kF64: {
      double v;
      std::memcpy(&v, p, 8);
      return static_cast<float>(v);
    }
    case DType::kF16: return fp16_to_f32(static_cast<uint16_t>(p[0] | p[1] << 8));
    case DType::kBF16: return bf16_to_f32(static_cast<uint16_t>(p[0] | p[1] << 8));
    case DType::kF8E4M3: return e4m3_to_f32(p[0]);
    case DType::kF8E5M2: return e5m2_to_f32(p[0]);
    default: return 0.f;
  }
}

bool is_float(DType t) {
  return t == DType::kF32 || t == DType::kF64 || t == DType::kF16 || t == DType::kBF16 || t == DType::kF8E4M3 ||
         t == DType::kF8E5M2;
}

}  // namespace

void to_f32(const Tensor& t, float* out, const Tensor* scale_inv, int64_t block_rows, int64_t block_cols) {
  TRIAD_CHECK(is_float(t.dtype), "safetensors: tensor ", q(t.name), " is ", dtype_name(t.dtype), ", not a float type");
  if (scale_inv == nullptr) {
    // The dtype decided once per tensor (a converter's inner loop; the file is little-endian).
    const uint8_t* p = t.data;
    const uint64_t n = t.n_elements;
    switch (t.dtype) {
      case DType::kF32: std::memcpy(out, p, n * 4); return;
      case DType::kBF16:
        for (uint64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(static_cast<uint16_t>(p[2 * i] | p[2 * i + 1] << 8));
        return;
      case DType::kF16:
        for (uint64_t i = 0; i < n; ++i) out[i] = fp16_to_f32(static_cast<uint16_t>(p[2 * i] | p[2 * i + 1] << 8));
        return;
      default:
        for (uint64_t i = 0; i < n; ++i) out[i] = element_f32(t, i);
        return;
    }
  }
  TRIAD_CHECK(t.dtype == DType::kF8E4M3 || t.dtype == DType::kF8E5M2, "safetensors: block scales go with FP8 weights, not ",
              dtype_name(t.dtype), " (tensor ", q(t.name), ")");
  TRIAD_CHECK(scale_inv->dtype == DType::kF32 || scale_inv->dtype == DType::kBF16, "safetensors: scale tensor ",
              q(scale_inv->name), " is ", dtype_name(scale_inv->dtype), " (F32 or BF16 expected)");
  TRIAD_CHECK(t.shape.size() == 2 && scale_inv->shape.size() == 2 && block_rows > 0 && block_cols > 0,
              "safetensors: block scales need a 2-D weight and a 2-D scale tensor (", q(t.name), ")");
  const int64_t rows = t.shape[0], cols = t.shape[1];
  const int64_t sr = (rows + block_rows - 1) / block_rows, sc = (cols + block_cols - 1) / block_cols;
  TRIAD_CHECK(scale_inv->shape[0] == sr && scale_inv->shape[1] == sc, "safetensors: scale tensor ", q(scale_inv->name),
              " is [", scale_inv->shape[0], ", ", scale_inv->shape[1], "] but ", q(t.name), " [", rows, ", ", cols,
              "] in ", block_rows, "x", block_cols, " blocks needs [", sr, ", ", sc, "]");
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const uint64_t i = static_cast<uint64_t>(r * cols + c);
      out[i] = element_f32(t, i) * element_f32(*scale_inv, static_cast<uint64_t>((r / block_rows) * sc + c / block_cols));
    }
}

}  // namespace triad::safetensors
