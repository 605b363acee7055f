#include <doctest/doctest.h>

#include "skip.hpp"
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "sinklab/data/fashion_mnist.hpp"

using namespace sinklab;
namespace fs = std::filesystem;

namespace {
std::vector<uint8_t> idx_bytes(std::vector<uint32_t> dims, const std::vector<uint8_t>& values) {
  std::vector<uint8_t> b = {0, 0, 0x08, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims) {
    b.push_back(uint8_t(d >> 24));
    b.push_back(uint8_t(d >> 16));
    b.push_back(uint8_t(d >> 8));
    b.push_back(uint8_t(d));
  }
  b.insert(b.end(), values.begin(), values.end());
  return b;
}
void write(const fs::path& p, const std::vector<uint8_t>& b) {
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}
}  // namespace

TEST_CASE("fashion_mnist: IDX images and labels from small files") {
  const fs::path dir = fs::temp_directory_path() / ("sinklab_idx_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::vector<uint8_t> pixels(3 * 28 * 28);
  for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = uint8_t(i % 256);
  write(dir / "train-images-idx3-ubyte", idx_bytes({3, 28, 28}, pixels));
  write(dir / "train-labels-idx1-ubyte", idx_bytes({3}, {9, 0, 4}));

  auto img = data::read_idx_images(dir / "train-images-idx3-ubyte");
  CHECK(img.shape() == Shape{3, 28, 28});
  CHECK(img(0, 0, 0) == 0.f);
  CHECK(img(0, 9, 3) == doctest::Approx(float((9 * 28 + 3) % 256) / 255.f));
  CHECK(img(2, 27, 27) == doctest::Approx(float((3 * 784 - 1) % 256) / 255.f));
  auto lab = data::read_idx_labels(dir / "train-labels-idx1-ubyte");
  CHECK(lab.to_vector() == std::vector<int32_t>{9, 0, 4});

  auto ds = data::load_fashion_mnist(data::FashionSplit::Train, dir);
  CHECK(ds.size() == 3);
  CHECK(std::string(data::fashion_mnist_class_name(ds.labels(0))) == "Ankle boot");
  CHECK_THROWS_WITH_AS(data::load_fashion_mnist(data::FashionSplit::Test, dir),
                       doctest::Contains("dataset-fashion-mnist"), Error);

  // Mismatched counts and bad labels are refused.
  write(dir / "train-labels-idx1-ubyte", idx_bytes({2}, {1, 2}));
  CHECK_THROWS_WITH_AS(data::load_fashion_mnist(data::FashionSplit::Train, dir), doctest::Contains("2 labels"), Error);
  write(dir / "train-labels-idx1-ubyte", idx_bytes({3}, {1, 2, 10}));
  CHECK_THROWS_WITH_AS(data::load_fashion_mnist(data::FashionSplit::Train, dir), doctest::Contains("label 10"), Error);
  fs::remove_all(dir);
}

TEST_CASE("fashion_mnist: bad magic, wrong rank and every truncation are refused with the file named") {
  const auto good = idx_bytes({2, 3, 4}, std::vector<uint8_t>(24, 7));
  CHECK(data::parse_idx(good, "ok", 3).dims == std::vector<int64_t>{2, 3, 4});
  for (std::size_t len = 0; len < good.size(); ++len) {
    std::vector<uint8_t> cut(good.begin(), good.begin() + std::ptrdiff_t(len));
    CHECK_THROWS_WITH_AS(data::parse_idx(cut, "cut.idx", 3), doctest::Contains("'cut.idx'"), Error);
  }
  auto bad = good;
  bad[0] = 0x1f;  // a gzip file starts 1f 8b
  bad[1] = 0x8b;
  CHECK_THROWS_WITH_AS(data::parse_idx(bad, "x", 3), doctest::Contains("bad magic number"), Error);
  bad = good;
  bad[2] = 0x0D;  // float data
  CHECK_THROWS_WITH_AS(data::parse_idx(bad, "x", 3), doctest::Contains("expected 8"), Error);
  CHECK_THROWS_WITH_AS(data::parse_idx(good, "x", 1), doctest::Contains("number of dimensions is 3, expected 1"),
                       Error);
  auto longer = good;
  longer.push_back(0);
  CHECK_THROWS_WITH_AS(data::parse_idx(longer, "x", 3), doctest::Contains("trailing"), Error);
  CHECK_THROWS_AS(data::read_idx_images("/nonexistent/train-images-idx3-ubyte"), Error);
}

TEST_CASE("fashion_mnist: implausible sizes are refused before anything is allocated for them") {
  // 2^20 x 2^20 x 2^20 values: the product passes 2^40 and would wrap 64 bits one dimension later.
  CHECK_THROWS_WITH_AS(data::parse_idx(idx_bytes({1u << 20, 1u << 20, 1u << 20}, {}), "x", 3),
                       doctest::Contains("implausibly large"), Error);
  CHECK_THROWS_WITH_AS(data::parse_idx(idx_bytes({0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu}, {}), "x", 3),
                       doctest::Contains("implausibly large"), Error);
  // A header that claims 4 billion labels over a 10-byte body is a truncated file, named as such.
  CHECK_THROWS_WITH_AS(data::parse_idx(idx_bytes({0xFFFFFFFFu}, std::vector<uint8_t>(10)), "x", 1),
                       doctest::Contains("truncated"), Error);
  // Zero images are a valid, empty file.
  CHECK(data::parse_idx(idx_bytes({0, 28, 28}, {}), "x", 3).values.empty());
  // Rank 0 and 255 dimensions with no room for them.
  CHECK_THROWS_WITH_AS(data::parse_idx({0, 0, 8, 0}, "x"), doctest::Contains("at least 1"), Error);
  CHECK_THROWS_WITH_AS(data::parse_idx({0, 0, 8, 255, 0, 0}, "x"), doctest::Contains("1024-byte header"), Error);
  // A directory where a file should be.
  const fs::path dir = fs::temp_directory_path() / ("sinklab_idx_dir_" + std::to_string(::getpid()));
  fs::create_directories(dir / "train-images-idx3-ubyte");
  CHECK_THROWS_WITH_AS(data::read_idx_images(dir / "train-images-idx3-ubyte"), doctest::Contains("is a directory"),
                       Error);
  fs::remove_all(dir);
}

#if defined(SINKLAB_WITH_ZLIB)
TEST_CASE("fashion_mnist: a corrupt, truncated or oversized gzip file is refused with the file named") {
  const fs::path dir = fs::temp_directory_path() / ("sinklab_gz_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto labels = idx_bytes({4000}, std::vector<uint8_t>(4000, 3));
  const fs::path good = dir / "t10k-labels-idx1-ubyte.gz";
  {
    gzFile gz = gzopen(good.c_str(), "wb");
    REQUIRE(gz != nullptr);
    REQUIRE(gzwrite(gz, labels.data(), static_cast<unsigned>(labels.size())) == int(labels.size()));
    REQUIRE(gzclose(gz) == Z_OK);
  }
  CHECK(data::read_idx_labels(good).numel() == 4000);
  const std::vector<uint8_t> bytes = io::read_file_bytes(good);

  // Truncated: the deflate stream ends early.
  const fs::path cut = dir / "cut.gz";
  write(cut, std::vector<uint8_t>(bytes.begin(), bytes.begin() + std::ptrdiff_t(bytes.size() / 2)));
  CHECK_THROWS_WITH_AS(data::read_idx_labels(cut), doctest::Contains("cut.gz"), Error);
  // Corrupt: the CRC or the deflate data damaged.
  for (std::size_t at : {bytes.size() - 6, std::size_t{12}}) {
    auto bad = bytes;
    bad[at] ^= 0x5A;
    const fs::path p = dir / "bad.gz";
    write(p, bad);
    CHECK_THROWS_WITH_AS(data::read_idx_labels(p), doctest::Contains("bad.gz"), Error);
  }
  // A gzip stream that inflates beyond the cap is refused, not buffered.
  CHECK_THROWS_WITH_AS(data::read_maybe_gzipped(good, 1000), doctest::Contains("inflates to more than 1000"), Error);
  fs::remove_all(dir);
}
#endif

TEST_CASE("fashion_mnist: the real data set, when installed" * sinklab_test::optional()) {
  data::ImageDataset test;
  try {
    test = data::load_fashion_mnist(data::FashionSplit::Test);
  } catch (const Error& e) {
    SINKLAB_SKIP("Fashion-MNIST not available (apt-get install dataset-fashion-mnist; scripts/fetch-data.sh "
                 "fashion-mnist): ",
                 e.what());
  }
  CHECK(test.images.shape() == Shape{10000, 28, 28});
  std::vector<int> per_class(10, 0);
  for (int64_t i = 0; i < test.size(); ++i) ++per_class[test.labels(i)];
  for (int c : per_class) CHECK(c == 1000);  // the test split is balanced
  float mx = 0;
  for (float v : test.images.to_vector()) mx = std::max(mx, v);
  CHECK(mx == 1.f);
}

#if defined(SINKLAB_WITH_ZLIB)
TEST_CASE("fashion_mnist: gzipped files straight from the Debian package" * sinklab_test::optional()) {
  const fs::path p = fs::path(data::kDebianFashionMnistDir) / "t10k-labels-idx1-ubyte.gz";
  if (!fs::exists(p)) SINKLAB_SKIP(p.string(), " not installed (apt-get install dataset-fashion-mnist)");
  auto labels = data::read_idx_labels(p);
  CHECK(labels.numel() == 10000);
}
#endif
