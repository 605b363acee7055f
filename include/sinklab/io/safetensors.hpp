// safetensors checkpoints (https://github.com/huggingface/safetensors, format section):
//   8 bytes   little-endian uint64 N = header length
//   N bytes   JSON object {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
//             "__metadata__": {"key": "value", ...}} padded with spaces to a multiple of 8
//   rest      the tensors' bytes, row-major little-endian; offsets are relative to this buffer
//             and must tile it exactly (contiguous, non-overlapping, no gaps, no tail).
//
// Files are written atomically (io/files.hpp). Reading validates every field, so a truncated
// or malformed file throws sinklab::Error naming the file and what was expected.
//
// Corruption inside the data bytes cannot be seen by structure alone, so sinklab also writes
// an FNV-1a-64 checksum of (canonical header without the checksum, data) into __metadata__ —
// twice, under two keys, so that a damaged key name cannot silently switch verification off:
// a file carrying either key must carry both, equal, and matching. Files written by other
// tools carry neither and are only checked structurally; other readers ignore the keys.
#pragma once
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "sinklab/core/error.hpp"
#include "sinklab/core/shape.hpp"
#include "sinklab/core/tensor.hpp"
#include "sinklab/io/files.hpp"

namespace sinklab::io {

static_assert(std::endian::native == std::endian::little,
              "sinklab::io::safetensors assumes a little-endian host (the format is little-endian)");

enum class DType { F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL };

inline const char* dtype_name(DType d) {
  switch (d) {
    case DType::F64: return "F64";
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::I64: return "I64";
    case DType::I32: return "I32";
    case DType::I16: return "I16";
    case DType::I8: return "I8";
    case DType::U8: return "U8";
    case DType::BOOL: return "BOOL";
  }
  return "?";
}
inline std::size_t dtype_size(DType d) {
  switch (d) {
    case DType::F64: case DType::I64: return 8;
    case DType::F32: case DType::I32: return 4;
    case DType::F16: case DType::BF16: case DType::I16: return 2;
    case DType::I8: case DType::U8: case DType::BOOL: return 1;
  }
  return 0;
}
inline bool dtype_is_floating(DType d) {
  return d == DType::F64 || d == DType::F32 || d == DType::F16 || d == DType::BF16;
}
inline bool parse_dtype(const std::string& s, DType& out) {
  for (DType d : {DType::F64, DType::F32, DType::F16, DType::BF16, DType::I64, DType::I32, DType::I16, DType::I8,
                  DType::U8, DType::BOOL})
    if (s == dtype_name(d)) {
      out = d;
      return true;
    }
  return false;
}

// The dtype sinklab writes for a C++ element type.
template <class T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, double>) return DType::F64;
  else if constexpr (std::is_same_v<T, float>) return DType::F32;
  else if constexpr (std::is_same_v<T, int64_t>) return DType::I64;
  else if constexpr (std::is_same_v<T, int32_t>) return DType::I32;
  else if constexpr (std::is_same_v<T, int16_t>) return DType::I16;
  else if constexpr (std::is_same_v<T, int8_t>) return DType::I8;
  else if constexpr (std::is_same_v<T, uint8_t>) return DType::U8;
  else if constexpr (std::is_same_v<T, bool>) return DType::BOOL;
  else static_assert(sizeof(T) == 0, "safetensors: no dtype for this element type");
}

using Metadata = std::map<std::string, std::string>;

namespace detail {

inline constexpr const char* kChecksumKey = "sinklab.fnv1a64";
inline constexpr const char* kChecksumCopyKey = "sinklab.fnv1a64.copy";
// Headers above this size are refused before parsing (the reference implementation uses 100 MB).
inline constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct Fnv1a64 {
  uint64_t h = 0xcbf29ce484222325ull;
  void update(const void* p, std::size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    for (std::size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
  }
  std::string hex() const {
    static const char* digits = "0123456789abcdef";
    std::string s(16, '0');
    for (int i = 0; i < 16; ++i) s[15 - i] = digits[(h >> (4 * i)) & 15];
    return s;
  }
};

// Checksum over the header with the two checksum entries removed (dumped canonically,
// keys sorted) followed by the data bytes.
inline std::string checksum(nlohmann::json header, const uint8_t* data, std::size_t n) {
  auto meta = header.find("__metadata__");
  if (meta != header.end()) {
    meta->erase(kChecksumKey);
    meta->erase(kChecksumCopyKey);
    if (meta->empty()) header.erase("__metadata__");
  }
  const std::string canon = header.dump();
  Fnv1a64 f;
  f.update(canon.data(), canon.size());
  f.update(data, n);
  return f.hex();
}

inline float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h >> 15) << 31;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf / nan
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {  // subnormal: normalise
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400) == 0);
    bits = sign | (uint32_t(112 - e) << 23) | ((mant & 0x3ff) << 13);
  }
  return std::bit_cast<float>(bits);
}
inline float bf16_to_float(uint16_t b) { return std::bit_cast<float>(uint32_t(b) << 16); }

template <class T>
T load_element(const uint8_t* p, DType d) {
  auto rd = [p](auto tag) {
    decltype(tag) v;
    std::memcpy(&v, p, sizeof v);
    return v;
  };
  switch (d) {
    case DType::F64: return static_cast<T>(rd(double{}));
    case DType::F32: return static_cast<T>(rd(float{}));
    case DType::F16: return static_cast<T>(half_to_float(rd(uint16_t{})));
    case DType::BF16: return static_cast<T>(bf16_to_float(rd(uint16_t{})));
    case DType::I64: return static_cast<T>(rd(int64_t{}));
    case DType::I32: return static_cast<T>(rd(int32_t{}));
    case DType::I16: return static_cast<T>(rd(int16_t{}));
    case DType::I8: return static_cast<T>(rd(int8_t{}));
    case DType::U8: return static_cast<T>(rd(uint8_t{}));
    case DType::BOOL: return static_cast<T>(rd(uint8_t{}) != 0);
  }
  return T{};
}

}  // namespace detail

// Where one tensor lives in a file.
struct TensorEntry {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte offsets into the data buffer
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  std::string shape_str() const {
    std::ostringstream os;
    os << '[';
    for (std::size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
    os << ']';
    return os.str();
  }
};

// A parsed, fully validated safetensors file held in memory.
class SafetensorsFile {
 public:
  static SafetensorsFile read(const std::filesystem::path& path) {
    return parse(read_file_bytes(path), path.string());
  }

  // `label` names the source in error messages (usually the path).
  static SafetensorsFile parse(std::vector<uint8_t> bytes, const std::string& label) {
    SafetensorsFile f;
    f.label_ = label;
    f.bytes_ = std::move(bytes);
    f.validate();
    return f;
  }

  const std::string& label() const { return label_; }
  const Metadata& metadata() const { return metadata_; }
  // Entries in data order.
  const std::vector<TensorEntry>& entries() const { return entries_; }
  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  bool checksum_verified() const { return checksum_verified_; }

  const TensorEntry& entry(const std::string& name) const {
    auto it = index_.find(name);
    SINKLAB_CHECK(it != index_.end(), "safetensors: tensor '", name, "' not found in '", label_, "' (it holds ",
                  names_str(), ")");
    return entries_[it->second];
  }

  // The tensor converted to T. Floating data never converts to an integer type.
  template <class T>
  Tensor<T> get(const std::string& name) const {
    const TensorEntry& e = entry(name);
    SINKLAB_CHECK(e.shape.size() <= static_cast<std::size_t>(kMaxRank), "safetensors: tensor '", name, "' in '",
                  label_, "' has rank ", e.shape.size(), " ", e.shape_str(), "; sinklab tensors have rank <= ",
                  kMaxRank);
    Tensor<T> t = Tensor<T>::empty(Shape::from_range(e.shape.begin(), e.shape.end()));
    copy_into(e, t);
    return t;
  }

  // Copies a tensor into `dst`, whose shape must match; the message names tensor, file and shapes.
  // A tensor on another device is filled from a host copy.
  template <class T, class Device>
  void read_into(const std::string& name, Tensor<T, Device>& dst) const {
    if constexpr (!std::is_same_v<Device, cpu>) {
      Tensor<T> host = Tensor<T>::empty(dst.shape());
      read_into(name, host);
      dst.copy_from(host.template to_device<Device>());
    } else {
      const TensorEntry& e = entry(name);
      const bool same_shape = e.shape.size() == static_cast<std::size_t>(dst.rank()) &&
                              std::equal(e.shape.begin(), e.shape.end(), dst.shape().begin());
      SINKLAB_CHECK(same_shape, "safetensors: tensor '", name, "' in '", label_, "' has shape ", e.shape_str(),
                    ", expected ", dst.shape());
      if (dst.is_contiguous()) {
        copy_into(e, dst);
      } else {
        Tensor<T> tmp = Tensor<T>::empty(dst.shape());
        copy_into(e, tmp);
        dst.copy_from(tmp);
      }
    }
  }

 private:
  template <class T>
  void copy_into(const TensorEntry& e, Tensor<T>& dst) const {
    if constexpr (std::is_integral_v<T>) {
      SINKLAB_CHECK(!dtype_is_floating(e.dtype), "safetensors: tensor '", e.name, "' in '", label_, "' has dtype ",
                    dtype_name(e.dtype), "; refusing to convert floating data to an integer tensor");
    }
    const uint8_t* src = data_begin() + e.begin;
    T* out = dst.data();
    const int64_t n = e.numel();
    if (e.dtype == dtype_of<T>()) {
      if (n > 0) std::memcpy(out, src, static_cast<std::size_t>(n) * sizeof(T));
      return;
    }
    const std::size_t es = dtype_size(e.dtype);
    for (int64_t i = 0; i < n; ++i) out[i] = detail::load_element<T>(src + static_cast<std::size_t>(i) * es, e.dtype);
  }

  const uint8_t* data_begin() const { return bytes_.data() + 8 + header_len_; }

  std::string names_str() const {
    std::string s;
    for (std::size_t i = 0; i < entries_.size() && i < 20; ++i) s += (i ? ", '" : "'") + entries_[i].name + "'";
    if (entries_.size() > 20) s += ", ...";
    return entries_.empty() ? "no tensors" : s;
  }

  template <class... A>
  [[noreturn]] void bad(const A&... a) const {
    sinklab::detail::fail("safetensors: '", label_, "' is not a valid safetensors file: ", a...);
  }

  void validate() {
    const uint64_t size = bytes_.size();
    if (size < 8) bad("it is ", size, " bytes long, shorter than the 8-byte header length");
    uint64_t n = 0;
    std::memcpy(&n, bytes_.data(), 8);
    if (n > detail::kMaxHeaderBytes) bad("header length ", n, " exceeds the limit of ", detail::kMaxHeaderBytes);
    if (n > size - 8) bad("header length ", n, " runs past the end of the file (", size, " bytes)");
    if (n < 2) bad("header length ", n, " is too short for a JSON object");
    header_len_ = n;
    const char* h = reinterpret_cast<const char*>(bytes_.data() + 8);
    if (h[0] != '{') bad("the header does not start with '{'");

    nlohmann::json header;
    try {
      header = nlohmann::json::parse(h, h + n);
    } catch (const nlohmann::json::exception& ex) {
      bad("the header is not valid JSON (", ex.what(), ")");
    }
    if (!header.is_object()) bad("the header is not a JSON object");

    const uint64_t data_size = size - 8 - n;
    for (auto it = header.begin(); it != header.end(); ++it) {
      if (it.key() == "__metadata__") {
        if (!it->is_object()) bad("__metadata__ is not an object");
        for (auto m = it->begin(); m != it->end(); ++m) {
          if (!m->is_string()) bad("__metadata__ value for '", m.key(), "' is not a string");
          metadata_[m.key()] = m->get<std::string>();
        }
        continue;
      }
      entries_.push_back(parse_entry(it.key(), *it, data_size));
    }

    std::sort(entries_.begin(), entries_.end(), [](const TensorEntry& a, const TensorEntry& b) {
      return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    uint64_t expect = 0;
    for (const TensorEntry& e : entries_) {
      if (e.begin != expect)
        bad("tensor '", e.name, "' starts at data offset ", e.begin, ", expected ", expect,
            " (tensors must be contiguous and non-overlapping)");
      expect = e.end;
    }
    if (expect != data_size)
      bad("the tensors cover ", expect, " data bytes but the file holds ", data_size,
          " (truncated or trailing bytes)");
    for (std::size_t i = 0; i < entries_.size(); ++i) index_[entries_[i].name] = i;

    const bool has_sum = metadata_.count(detail::kChecksumKey) != 0;
    const bool has_copy = metadata_.count(detail::kChecksumCopyKey) != 0;
    if (has_sum || has_copy) {
      if (!has_sum || !has_copy)
        bad("__metadata__ holds only one of the checksum keys '", detail::kChecksumKey, "' and '",
            detail::kChecksumCopyKey, "' (damaged header)");
      const std::string& a = metadata_[detail::kChecksumKey];
      if (a != metadata_[detail::kChecksumCopyKey]) bad("the two stored checksums differ (damaged header)");
      const std::string actual = detail::checksum(header, data_begin(), data_size);
      if (a != actual) bad("checksum mismatch: stored ", a, ", computed ", actual, " (corrupted header or data)");
      metadata_.erase(detail::kChecksumKey);
      metadata_.erase(detail::kChecksumCopyKey);
      checksum_verified_ = true;
    }
  }

  TensorEntry parse_entry(const std::string& name, const nlohmann::json& j, uint64_t data_size) const {
    TensorEntry e;
    e.name = name;
    if (!j.is_object()) bad("entry '", name, "' is not an object");
    for (auto it = j.begin(); it != j.end(); ++it)
      if (it.key() != "dtype" && it.key() != "shape" && it.key() != "data_offsets")
        bad("entry '", name, "' has an unknown field '", it.key(), "'");
    auto dt = j.find("dtype");
    if (dt == j.end() || !dt->is_string()) bad("entry '", name, "' has no string 'dtype'");
    if (!parse_dtype(dt->get<std::string>(), e.dtype))
      bad("tensor '", name, "' has unknown dtype '", dt->get<std::string>(), "'");
    auto sh = j.find("shape");
    if (sh == j.end() || !sh->is_array()) bad("entry '", name, "' has no 'shape' array");
    __int128 numel = 1;
    for (const auto& d : *sh) {
      if (!d.is_number_unsigned()) bad("tensor '", name, "' has a shape entry that is not a non-negative integer");
      const uint64_t v = d.get<uint64_t>();
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) bad("tensor '", name, "' extent too large");
      e.shape.push_back(static_cast<int64_t>(v));
      numel *= v;
      if (numel > (__int128(1) << 62)) bad("tensor '", name, "' has too many elements");
    }
    auto off = j.find("data_offsets");
    if (off == j.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
        !(*off)[1].is_number_unsigned())
      bad("tensor '", name, "' has no 'data_offsets' pair of non-negative integers");
    e.begin = (*off)[0].get<uint64_t>();
    e.end = (*off)[1].get<uint64_t>();
    if (e.begin > e.end) bad("tensor '", name, "' has data_offsets [", e.begin, ", ", e.end, "] in reverse order");
    if (e.end > data_size)
      bad("tensor '", name, "' ends at data offset ", e.end, " but the data buffer holds ", data_size, " bytes");
    // numel <= 2^62 and dtype sizes <= 8: `want` fits in 2^65, so it is compared, not wrapped.
    const __int128 want = numel * static_cast<__int128>(dtype_size(e.dtype));
    if (want > static_cast<__int128>(data_size))
      bad("tensor '", name, "' (", dtype_name(e.dtype), ", shape ", e.shape_str(), ") needs ",
          static_cast<long double>(want), " bytes, more than the file's ", data_size, " data bytes");
    if (static_cast<__int128>(e.end - e.begin) != want)
      bad("tensor '", name, "' (", dtype_name(e.dtype), ", shape ", e.shape_str(), ") needs ",
          static_cast<uint64_t>(want), " bytes but its data_offsets span ", e.end - e.begin);
    return e;
  }

  std::string label_;
  std::vector<uint8_t> bytes_;
  uint64_t header_len_ = 0;
  Metadata metadata_;
  std::vector<TensorEntry> entries_;
  std::map<std::string, std::size_t> index_;
  bool checksum_verified_ = false;
};

// Collects named tensors (any supported element type) and writes them as one file.
class SafetensorsWriter {
 public:
  // A tensor on another device is written from a host copy.
  template <class T, class Device>
  SafetensorsWriter& add(const std::string& name, const Tensor<T, Device>& t) {
    SINKLAB_CHECK(!name.empty(), "safetensors: empty tensor name");
    SINKLAB_CHECK(name != "__metadata__", "safetensors: '__metadata__' is reserved and cannot name a tensor");
    SINKLAB_CHECK(t.defined(), "safetensors: tensor '", name, "' is undefined");
    for (const Item& it : items_) SINKLAB_CHECK(it.name != name, "safetensors: duplicate tensor name '", name, "'");
    Item it;
    it.name = name;
    it.dtype = dtype_of<T>();
    it.shape.assign(t.shape().begin(), t.shape().end());
    const Tensor<T> c = t.template to_device<cpu>().contiguous();
    const auto* p = reinterpret_cast<const char*>(c.data());
    it.bytes.assign(p, p + static_cast<std::size_t>(t.numel()) * sizeof(T));
    items_.push_back(std::move(it));
    return *this;
  }
  SafetensorsWriter& metadata(const std::string& key, const std::string& value) {
    SINKLAB_CHECK(key != detail::kChecksumKey && key != detail::kChecksumCopyKey, "safetensors: metadata key '", key,
                  "' is reserved for sinklab's checksum");
    metadata_[key] = value;
    return *this;
  }
  SafetensorsWriter& metadata(const Metadata& m) {
    for (const auto& [k, v] : m) metadata(k, v);
    return *this;
  }

  // Header (with length prefix) and data, ready to write.
  std::pair<std::string, std::string> serialize() const {
    nlohmann::json header = nlohmann::json::object();
    std::string data;
    // Larger elements first, like the reference writer: with the header padded to 8 bytes,
    // every tensor then starts at a multiple of its element size in the file.
    std::vector<const Item*> order;
    for (const Item& it : items_) order.push_back(&it);
    std::stable_sort(order.begin(), order.end(),
                     [](const Item* a, const Item* b) { return dtype_size(a->dtype) > dtype_size(b->dtype); });
    for (const Item* item : order) {
      const Item& it = *item;
      const uint64_t begin = data.size();
      data += it.bytes;
      header[it.name] = {{"dtype", dtype_name(it.dtype)}, {"shape", it.shape}, {"data_offsets", {begin, data.size()}}};
    }
    if (!metadata_.empty()) header["__metadata__"] = metadata_;
    const std::string sum = detail::checksum(header, reinterpret_cast<const uint8_t*>(data.data()), data.size());
    header["__metadata__"][detail::kChecksumKey] = sum;
    header["__metadata__"][detail::kChecksumCopyKey] = sum;
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');  // keeps the data 8-byte aligned
    std::string out(8, '\0');
    const uint64_t n = text.size();
    std::memcpy(out.data(), &n, 8);
    out += text;
    return {std::move(out), std::move(data)};
  }

  void write(const std::filesystem::path& path) const {
    auto [head, data] = serialize();
    write_file_atomically(path, {head, data});
  }

 private:
  struct Item {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    std::string bytes;
  };
  std::vector<Item> items_;
  Metadata metadata_;
};

template <class T>
void save_safetensors(const std::filesystem::path& path, const std::vector<std::pair<std::string, Tensor<T>>>& tensors,
                      const Metadata& metadata = {}) {
  SafetensorsWriter w;
  for (const auto& [name, t] : tensors) w.add(name, t);
  w.metadata(metadata).write(path);
}
template <class T, class Compare>
void save_safetensors(const std::filesystem::path& path, const std::map<std::string, Tensor<T>, Compare>& tensors,
                      const Metadata& metadata = {}) {
  SafetensorsWriter w;
  for (const auto& [name, t] : tensors) w.add(name, t);
  w.metadata(metadata).write(path);
}

// Every tensor of a file, converted to T (see SafetensorsFile::get for the conversion rule).
template <class T = float>
std::map<std::string, Tensor<T>> load_safetensors(const std::filesystem::path& path, Metadata* metadata = nullptr) {
  const SafetensorsFile f = SafetensorsFile::read(path);
  std::map<std::string, Tensor<T>> out;
  for (const TensorEntry& e : f.entries()) out.emplace(e.name, f.get<T>(e.name));
  if (metadata) *metadata = f.metadata();
  return out;
}

struct LoadOptions {
  bool allow_extra = false;  // tolerate tensors in the file that nobody asked for
};

// Fills existing tensors from a file. `for_each(visit)` must call visit(name, Tensor<T>&) for
// every expected tensor (e.g. by walking a model's parameters). Refuses a missing tensor, a
// shape mismatch and, unless allowed, tensors in the file that were not asked for.
template <class T, class ForEach>
void load_into(const std::filesystem::path& path, ForEach&& for_each, const LoadOptions& opt = {}) {
  const SafetensorsFile f = SafetensorsFile::read(path);
  std::map<std::string, bool> used;
  for (const TensorEntry& e : f.entries()) used[e.name] = false;
  std::function<void(const std::string&, Tensor<T>&)> visit = [&](const std::string& name, Tensor<T>& t) {
    SINKLAB_CHECK(f.contains(name), "safetensors: '", path.string(), "' has no tensor '", name, "' (expected shape ",
                  t.shape(), ")");
    f.read_into(name, t);
    used[name] = true;
  };
  for_each(visit);
  if (!opt.allow_extra) {
    std::string extra;
    for (const auto& [name, u] : used)
      if (!u) extra += (extra.empty() ? "'" : ", '") + name + "'";
    SINKLAB_CHECK(extra.empty(), "safetensors: '", path.string(), "' holds tensors that were not expected: ", extra,
                  " (pass LoadOptions{.allow_extra = true} to ignore them)");
  }
}

// Shorthand for a fixed list of named destinations.
template <class T>
void load_into(const std::filesystem::path& path, const std::vector<std::pair<std::string, Tensor<T>*>>& targets,
               const LoadOptions& opt = {}) {
  load_into<T>(
      path,
      [&](auto& visit) {
        for (const auto& [name, t] : targets) visit(name, *t);
      },
      opt);
}

}  // namespace sinklab::io
