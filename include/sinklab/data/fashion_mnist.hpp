// IDX files (LeCun's MNIST format) and the Fashion-MNIST data set.
//
// IDX: a big-endian header — two zero bytes, a type code (0x08 = unsigned byte, the only one
// used here), the number of dimensions — then one big-endian uint32 per dimension, then the
// values row-major. Every field and the exact file size are checked.
//
// Fashion-MNIST is looked for, in order, in
//   ${SINKLAB_DATA:-$HOME/.cache/sinklab}/fashion-mnist/  (plain files; scripts/fetch-data.sh)
//   /usr/share/datasets/fashion-mnist/                    (Debian's dataset-fashion-mnist, *.gz)
// Debian ships the files gzipped. Reading .gz needs zlib: define SINKLAB_WITH_ZLIB and link
// zlib (-lz / ZLIB::ZLIB); otherwise run `scripts/fetch-data.sh fashion-mnist`, which gunzips
// them into the cache.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "sinklab/core/error.hpp"
#include "sinklab/core/tensor.hpp"
#include "sinklab/data/cache_dir.hpp"
#include "sinklab/io/files.hpp"

#if defined(SINKLAB_WITH_ZLIB)
#include <zlib.h>
#endif

namespace sinklab::data {

// Bytes of a file, gunzipped when its name ends in .gz. A gzip stream that inflates past
// `max_bytes` (Fashion-MNIST's largest file is 47 MB) is refused rather than filling memory.
inline std::vector<uint8_t> read_maybe_gzipped(const std::filesystem::path& path,
                                               std::size_t max_bytes = std::size_t{1} << 30) {
  if (path.extension() != ".gz") return io::read_file_bytes(path);
#if defined(SINKLAB_WITH_ZLIB)
  {
    std::error_code ec;
    SINKLAB_CHECK(std::filesystem::is_regular_file(path, ec), "data::read_maybe_gzipped: '", path.string(),
                  "' is not a regular file");
  }
  gzFile gz = gzopen(path.c_str(), "rb");
  SINKLAB_CHECK(gz != nullptr, "data::read_maybe_gzipped: cannot open '", path.string(), "'");
  std::vector<uint8_t> out;
  std::vector<uint8_t> buf(1 << 16);
  for (;;) {
    const int n = gzread(gz, buf.data(), static_cast<unsigned>(buf.size()));
    if (n < 0) {
      int err = 0;
      const std::string msg = gzerror(gz, &err);
      gzclose(gz);
      sinklab::detail::fail("data::read_maybe_gzipped: '", path.string(), "' is not a valid gzip file: ", msg);
    }
    if (n == 0) break;
    if (out.size() + static_cast<std::size_t>(n) > max_bytes) {
      gzclose(gz);
      sinklab::detail::fail("data::read_maybe_gzipped: '", path.string(), "' inflates to more than ", max_bytes,
                            " bytes; refusing it (not a data file sinklab reads?)");
    }
    out.insert(out.end(), buf.begin(), buf.begin() + n);
  }
  gzclose(gz);
  return out;
#else
  sinklab::detail::fail("data::read_maybe_gzipped: '", path.string(),
                        "' is gzipped and sinklab was built without zlib. Run `scripts/fetch-data.sh fashion-mnist` "
                        "to unpack it into ${SINKLAB_DATA:-$HOME/.cache/sinklab}/fashion-mnist, or define "
                        "SINKLAB_WITH_ZLIB and link zlib.");
#endif
}

// A parsed unsigned-byte IDX array: shape and values.
struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> values;
};

// Parses IDX bytes; `label` names the source in errors. expected_rank < 0 accepts any rank.
inline IdxArray parse_idx(const std::vector<uint8_t>& b, const std::string& label, int expected_rank = -1) {
  auto bad = [&](const auto&... a) { sinklab::detail::fail("data::parse_idx: '", label, "': ", a...); };
  if (b.size() < 4) bad("file is ", b.size(), " bytes, shorter than the 4-byte IDX magic number");
  if (b[0] != 0 || b[1] != 0)
    bad("bad magic number: first two bytes are ", int(b[0]), ", ", int(b[1]), ", expected 0, 0 (not an IDX file?)");
  if (b[2] != 0x08) bad("element type code ", int(b[2]), ", expected 8 (0x08, unsigned byte)");
  const int rank = b[3];
  if (rank < 1) bad("number of dimensions is 0, expected at least 1");
  if (expected_rank >= 0 && rank != expected_rank)
    bad("number of dimensions is ", rank, ", expected ", expected_rank, " (magic 0x0000080", expected_rank, ")");
  const std::size_t header = 4 + 4 * static_cast<std::size_t>(rank);
  if (b.size() < header)
    bad("file is ", b.size(), " bytes, shorter than its ", header, "-byte header (", rank, " dimensions)");
  IdxArray a;
  uint64_t count = 1;
  for (int d = 0; d < rank; ++d) {
    const uint8_t* p = b.data() + 4 + 4 * d;
    const uint32_t v = (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
    a.dims.push_back(v);
    // Checked before multiplying: 2^40 times a 32-bit extent would wrap 64 bits.
    constexpr uint64_t kMaxValues = uint64_t(1) << 40;
    if (v != 0 && count > kMaxValues / v) bad("dimensions are implausibly large (", a.dims.size(), " read so far)");
    count *= v;
  }
  if (b.size() != header + count)
    bad("file is ", b.size(), " bytes, expected ", header + count, " (", header, " header + ", count,
        " values for the dimensions in its header)", b.size() < header + count ? "; truncated" : "; trailing bytes");
  a.values.assign(b.begin() + static_cast<std::ptrdiff_t>(header), b.end());
  return a;
}

// Images [N, rows, cols] scaled to [0, 1].
inline Tensor<float> read_idx_images(const std::filesystem::path& path) {
  const IdxArray a = parse_idx(read_maybe_gzipped(path), path.string(), 3);
  Tensor<float> t = Tensor<float>::empty({a.dims[0], a.dims[1], a.dims[2]});
  float* p = t.data();
  for (std::size_t i = 0; i < a.values.size(); ++i) p[i] = static_cast<float>(a.values[i]) * (1.0f / 255.0f);
  return t;
}

// Labels [N].
inline Tensor<int32_t> read_idx_labels(const std::filesystem::path& path) {
  const IdxArray a = parse_idx(read_maybe_gzipped(path), path.string(), 1);
  Tensor<int32_t> t = Tensor<int32_t>::empty({a.dims[0]});
  for (std::size_t i = 0; i < a.values.size(); ++i) t.data()[i] = a.values[i];
  return t;
}

struct ImageDataset {
  Tensor<float> images;    // [N, 28, 28] in [0, 1]
  Tensor<int32_t> labels;  // [N], 0..9
  int64_t size() const { return labels.numel(); }
};

enum class FashionSplit { Train, Test };

inline const char* fashion_mnist_class_name(int32_t label) {
  static const char* names[] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  SINKLAB_CHECK(label >= 0 && label < 10, "fashion_mnist_class_name: label ", label, " is outside 0..9");
  return names[label];
}

inline constexpr const char* kDebianFashionMnistDir = "/usr/share/datasets/fashion-mnist";

// Loads one split. `dir` overrides the search described at the top of this file.
inline ImageDataset load_fashion_mnist(FashionSplit split, std::optional<std::filesystem::path> dir = std::nullopt) {
  namespace fs = std::filesystem;
  const std::string prefix = split == FashionSplit::Train ? "train" : "t10k";
  const std::string images = prefix + "-images-idx3-ubyte", labels = prefix + "-labels-idx1-ubyte";
  std::vector<fs::path> dirs;
  if (dir) {
    dirs.push_back(*dir);
  } else {
    dirs.push_back(data_cache_dir() / "fashion-mnist");
    dirs.push_back(kDebianFashionMnistDir);
  }
  std::string looked;
  for (const fs::path& d : dirs) {
    for (const std::string ext : {"", ".gz"}) {
      const fs::path ip = d / (images + ext), lp = d / (labels + ext);
      if (!fs::exists(ip) || !fs::exists(lp)) continue;
      ImageDataset ds{read_idx_images(ip), read_idx_labels(lp)};
      SINKLAB_CHECK(ds.images.size(1) == 28 && ds.images.size(2) == 28, "load_fashion_mnist: '", ip.string(),
                    "' holds images of ", ds.images.size(1), "x", ds.images.size(2), ", expected 28x28");
      SINKLAB_CHECK(ds.images.size(0) == ds.labels.size(0), "load_fashion_mnist: '", ip.string(), "' holds ",
                    ds.images.size(0), " images but '", lp.string(), "' holds ", ds.labels.size(0), " labels");
      for (int64_t i = 0; i < ds.labels.numel(); ++i)
        SINKLAB_CHECK(ds.labels.data()[i] >= 0 && ds.labels.data()[i] < 10, "load_fashion_mnist: '", lp.string(),
                      "' has label ", ds.labels.data()[i], " at index ", i, ", expected 0..9");
      return ds;
    }
    looked += (looked.empty() ? "'" : ", '") + d.string() + "'";
  }
  sinklab::detail::fail("load_fashion_mnist: ", images, " and ", labels, " (or .gz) not found in ", looked,
                        ". Install Debian's package with `apt-get install dataset-fashion-mnist` and run "
                        "`scripts/fetch-data.sh fashion-mnist` (unpacks into ${SINKLAB_DATA:-$HOME/.cache/sinklab}/"
                        "fashion-mnist).");
}

}  // namespace sinklab::data
