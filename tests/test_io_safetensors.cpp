#include <doctest/doctest.h>

#include "temp_dir.hpp"
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "sinklab/core/rng.hpp"
#include "sinklab/io/safetensors.hpp"

using namespace sinklab;
namespace fs = std::filesystem;

namespace {

using sinklab_test::TempDir;

template <class T>
bool same(const Tensor<T>& a, const Tensor<T>& b) {
  return a.shape() == b.shape() && a.to_vector() == b.to_vector();
}

// Little helper to hand-write headers for foreign-style files.
std::vector<uint8_t> make_file(const std::string& header, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> out(8 + header.size() + data.size());
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  std::copy(header.begin(), header.end(), out.begin() + 8);
  std::copy(data.begin(), data.end(), out.begin() + 8 + static_cast<std::ptrdiff_t>(header.size()));
  return out;
}

}  // namespace

TEST_CASE("safetensors: round trip of F32, F64 and I32 tensors with metadata") {
  TempDir dir;
  Rng rng(7);
  auto w = rng.normal<float>({3, 4, 5});
  auto b = rng.normal<float>({5});
  auto s = Tensor<float>::scalar(2.5f);
  auto e = Tensor<float>::zeros({0, 3});
  const fs::path p = dir / "model.safetensors";
  io::save_safetensors<float>(p, {{"layer.w", w}, {"layer.b", b}, {"scale", s}, {"empty", e}},
                              {{"step", "1200"}, {"note", "a \"quoted\", value"}});
  io::Metadata meta;
  auto got = io::load_safetensors<float>(p, &meta);
  REQUIRE(got.size() == 4);
  CHECK(same(got["layer.w"], w));
  CHECK(same(got["layer.b"], b));
  CHECK(same(got["scale"], s));
  CHECK(got["empty"].shape() == Shape{0, 3});
  CHECK(meta == io::Metadata{{"step", "1200"}, {"note", "a \"quoted\", value"}});  // checksum keys hidden

  io::SafetensorsWriter wr;
  auto d = rng.normal<double>({2, 3});
  auto ids = Tensor<int32_t>::arange({3, 1}, -3);  // 12 bytes: would misalign a following F64
  wr.add("ids", ids).add("d", d).add("wt", w.transpose(0, 2));  // non-contiguous input
  wr.write(p);
  auto f = io::SafetensorsFile::read(p);
  CHECK(f.checksum_verified());
  CHECK(f.entry("d").dtype == io::DType::F64);
  CHECK(f.entry("ids").dtype == io::DType::I32);
  CHECK(same(f.get<double>("d"), d));
  CHECK(same(f.get<int32_t>("ids"), ids));
  CHECK(same(f.get<float>("wt"), w.transpose(0, 2).contiguous()));
  CHECK(f.get<float>("ids")(2, 0) == -1.f);               // integer -> float converts
  CHECK_THROWS_AS(f.get<int32_t>("d"), Error);            // float -> integer refused
  CHECK_THROWS_WITH_AS(f.get<float>("nope"), doctest::Contains("'nope' not found"), Error);
  // The header is padded to 8 bytes and every tensor starts at a multiple of its element size.
  auto bytes = io::read_file_bytes(p);
  uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  CHECK(n % 8 == 0);
  for (const auto& e : f.entries()) CHECK(e.begin % io::dtype_size(e.dtype) == 0);
}

TEST_CASE("safetensors: foreign files (no checksum), F16/BF16 conversion and structural checks") {
  // F16 1.0 = 0x3C00, -2.0 = 0xC000, smallest subnormal 2^-24 = 0x0001; BF16 1.5 = 0x3FC0.
  std::vector<uint8_t> data = {0x00, 0x3C, 0x00, 0xC0, 0x01, 0x00, 0xC0, 0x3F};
  std::string h =
      R"({"h":{"dtype":"F16","shape":[3],"data_offsets":[0,6]},"b":{"dtype":"BF16","shape":[1],"data_offsets":[6,8]}})";
  auto f = io::SafetensorsFile::parse(make_file(h, data), "mem");
  CHECK_FALSE(f.checksum_verified());
  auto hv = f.get<float>("h");
  CHECK(hv(0) == 1.0f);
  CHECK(hv(1) == -2.0f);
  CHECK(hv(2) == std::ldexp(1.0f, -24));
  CHECK(f.get<float>("b")(0) == 1.5f);
  CHECK(f.entries().front().name == "h");  // data order

  auto rejects = [&](const std::string& header, const std::vector<uint8_t>& d, const char* why) {
    CHECK_THROWS_WITH_AS(io::SafetensorsFile::parse(make_file(header, d), "mem"), doctest::Contains(why), Error);
  };
  rejects(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", std::vector<uint8_t>(7), "ends at data offset");
  rejects(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", std::vector<uint8_t>(9), "trailing");
  rejects(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::vector<uint8_t>(8), "needs 12 bytes");
  rejects(R"({"a":{"dtype":"F99","shape":[2],"data_offsets":[0,8]}})", std::vector<uint8_t>(8), "unknown dtype");
  rejects(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
          std::vector<uint8_t>(8), "contiguous and non-overlapping");
  rejects(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", std::vector<uint8_t>(8), "expected 0");
  rejects(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", std::vector<uint8_t>(4), "non-negative");
  rejects(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}})", std::vector<uint8_t>(4), "unknown field");
  rejects(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]})", std::vector<uint8_t>(4), "not valid JSON");
  rejects(R"({"__metadata__":{"k":1}})", {}, "not a string");
  rejects(R"([1,2])", {}, "does not start with '{'");
  CHECK_THROWS_WITH_AS(io::SafetensorsFile::parse({1, 2, 3}, "mem"), doctest::Contains("shorter than"), Error);
  CHECK_THROWS_AS(io::SafetensorsFile::read("/nonexistent/dir/x.safetensors"), Error);
}

TEST_CASE("safetensors: hostile files are refused with a message before any large allocation") {
  auto rejects = [](const std::vector<uint8_t>& bytes, const char* why) {
    CHECK_THROWS_WITH_AS(io::SafetensorsFile::parse(bytes, "mem"), doctest::Contains(why), Error);
  };
  auto with_length = [](uint64_t n, std::size_t actual) {
    std::vector<uint8_t> b(8 + actual, ' ');
    std::memcpy(b.data(), &n, 8);
    if (actual > 0) b[8] = '{';
    return b;
  };
  // Header lengths: 4 GiB, 2^64 - 1, past the end of the file, above the 100 MB limit.
  rejects(with_length(uint64_t{1} << 32, 16), "exceeds the limit");
  rejects(with_length(~uint64_t{0}, 16), "exceeds the limit");
  rejects(with_length(64, 16), "runs past the end of the file");
  // Tensors larger than the file, absurd shapes, offsets that overflow or wrap.
  const std::vector<uint8_t> four(4);
  rejects(make_file(R"({"a":{"dtype":"F32","shape":[1000000000,1000000000],"data_offsets":[0,4]}})", four),
          "needs 4e+18 bytes, more than the file's 4 data bytes");
  rejects(make_file(R"({"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,4]}})", four),
          "too many elements");
  rejects(make_file(R"({"a":{"dtype":"F32","shape":[18446744073709551615],"data_offsets":[0,4]}})", four),
          "extent too large");
  rejects(make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,18446744073709551615]}})", four),
          "ends at data offset 18446744073709551615");
  rejects(make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[18446744073709551615,4]}})", four),
          "reverse order");
  // 2^62 F64 elements need 2^65 bytes: the size must not wrap to a small number that matches.
  rejects(make_file(R"({"a":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,0]}})", {}),
          "more than the file's 0 data bytes");
  rejects(make_file(R"({"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", four), "non-negative integer");
  rejects(make_file(R"({"a":{"dtype":7,"shape":[1],"data_offsets":[0,4]}})", four), "no string 'dtype'");
  rejects(make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", four), "data_offsets");
  rejects(make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", four), "data_offsets");
  // A rank the tensors cannot hold is refused when read, not by an out-of-range write.
  auto deep = io::SafetensorsFile::parse(
      make_file(R"({"a":{"dtype":"F32","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,4]}})", four), "mem");
  CHECK_THROWS_WITH_AS(deep.get<float>("a"), doctest::Contains("rank 9"), Error);
  // Something that is not a regular file is refused before its "size" sizes a buffer.
  TempDir dir;
  CHECK_THROWS_WITH_AS(io::SafetensorsFile::read(dir.path), doctest::Contains("is a directory"), Error);
  CHECK_THROWS_WITH_AS(io::SafetensorsFile::read(dir / "missing.safetensors"), doctest::Contains("no such file"),
                       Error);
}

namespace {
void check_loads_identically(const std::vector<uint8_t>& bytes, const io::SafetensorsFile& ref) {
  auto f = io::SafetensorsFile::parse(bytes, "mem");
  REQUIRE(f.entries().size() == ref.entries().size());
  for (const auto& e : ref.entries()) {
    REQUIRE(f.contains(e.name));
    CHECK(f.get<double>(e.name).to_vector() == ref.get<double>(e.name).to_vector());
  }
  CHECK(f.metadata() == ref.metadata());
}
}  // namespace

TEST_CASE("safetensors: every truncation and every single-byte corruption is refused cleanly") {
  io::SafetensorsWriter w;
  w.add("a", Tensor<float>::arange({2, 3}, 0.5f));
  w.add("b", Tensor<int32_t>::arange({3}, 7));
  w.add("c", Tensor<double>::from({2}, {1e-3, -4.0}));
  w.metadata("epoch", "3");
  auto [head, data] = w.serialize();
  std::vector<uint8_t> file(head.begin(), head.end());
  file.insert(file.end(), data.begin(), data.end());
  const auto ref = io::SafetensorsFile::parse(file, "ref");
  CHECK(ref.checksum_verified());

  int truncations_refused = 0;
  for (std::size_t len = 0; len < file.size(); ++len) {
    std::vector<uint8_t> cut(file.begin(), file.begin() + static_cast<std::ptrdiff_t>(len));
    CHECK_THROWS_AS(io::SafetensorsFile::parse(cut, "truncated"), Error);
    ++truncations_refused;
  }
  CHECK(truncations_refused == static_cast<int>(file.size()));

  // Three corruptions per byte: flip the low bit, flip all bits, and replace with a space.
  // The only acceptable outcomes are sinklab::Error or a load identical to the original
  // (possible only where the change leaves the parsed header and the data unchanged).
  int refused = 0, identical = 0;
  for (std::size_t i = 0; i < file.size(); ++i) {
    for (int kind = 0; kind < 3; ++kind) {
      std::vector<uint8_t> bad = file;
      bad[i] = kind == 0 ? uint8_t(bad[i] ^ 1u) : kind == 1 ? uint8_t(~bad[i]) : uint8_t(' ');
      if (bad == file) continue;
      try {
        io::SafetensorsFile::parse(bad, "corrupt");
      } catch (const Error&) {
        ++refused;
        continue;
      }
      check_loads_identically(bad, ref);
      ++identical;
      INFO("byte ", i, " kind ", kind, " loaded identically");
    }
  }
  MESSAGE("corruptions refused: ", refused, ", harmless (identical load): ", identical, " of ", file.size(),
          " bytes");
  CHECK(identical == 0);
}

TEST_CASE("safetensors: load_into fills expected tensors and names every mismatch") {
  TempDir dir;
  const fs::path p = dir / "ckpt.safetensors";
  Rng rng(3);
  auto w = rng.normal<float>({4, 2});
  auto b = rng.normal<float>({2});
  io::save_safetensors<float>(p, {{"w", w}, {"b", b}});

  auto w2 = Tensor<float>::zeros({4, 2});
  auto b2 = Tensor<float>::zeros({2});
  io::load_into<float>(p, {{"w", &w2}, {"b", &b2}});
  CHECK(same(w2, w));
  CHECK(same(b2, b));

  // Through a visitor, into a non-contiguous destination.
  auto big = Tensor<float>::zeros({2, 4});
  auto wt = big.transpose(0, 1);  // [4, 2] view
  io::load_into<float>(p, [&](auto& visit) {
    visit("w", wt);
    visit("b", b2);
  });
  CHECK(big(1, 3) == w(3, 1));

  auto wrong = Tensor<float>::zeros({2, 4});
  const std::string want = "tensor 'w' in '" + p.string() + "' has shape [4, 2], expected [2, 4]";
  CHECK_THROWS_WITH_AS(io::load_into<float>(p, {{"w", &wrong}, {"b", &b2}}), doctest::Contains(want.c_str()), Error);
  auto extra = Tensor<float>::zeros({3});
  CHECK_THROWS_WITH_AS(io::load_into<float>(p, {{"w", &w2}, {"b", &b2}, {"gain", &extra}}),
                       doctest::Contains("has no tensor 'gain' (expected shape [3])"), Error);
  CHECK_THROWS_WITH_AS(io::load_into<float>(p, {{"w", &w2}}), doctest::Contains("not expected: 'b'"), Error);
  io::load_into<float>(p, {{"w", &w2}}, io::LoadOptions{.allow_extra = true});
}

TEST_CASE("safetensors: a failed write leaves the previous file intact and no temporary behind") {
  TempDir dir;
  const fs::path p = dir / "ckpt.safetensors";
  auto old = Tensor<float>::arange({8});
  io::save_safetensors<float>(p, {{"x", old}});
  const auto before = io::read_file_bytes(p);

  // Simulate a full disk: cap the file size this process may write (applies to root too),
  // so write() fails with EFBIG part-way through the new, larger checkpoint.
  struct rlimit saved{};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &saved) == 0);
  auto prev_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit cap = saved;
  cap.rlim_cur = 4096;
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &cap) == 0);
  bool threw = false;
  std::string msg;
  try {
    io::save_safetensors<float>(p, {{"x", Tensor<float>::ones({100000})}});
  } catch (const Error& e) {
    threw = true;
    msg = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, prev_handler);
  CHECK(threw);
  CHECK(msg.find("unchanged") != std::string::npos);
  CHECK(io::read_file_bytes(p) == before);
  CHECK(same(io::load_safetensors<float>(p)["x"], old));
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir.path)) {
    ++files;
    CHECK(e.path().filename() == "ckpt.safetensors");
  }
  CHECK(files == 1);

  // A directory that does not exist: refused with the path in the message.
  CHECK_THROWS_WITH_AS(io::save_safetensors<float>(dir / "missing/sub/x.safetensors", {{"x", old}}),
                       doctest::Contains("missing/sub"), Error);
}
