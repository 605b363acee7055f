// Shape of a dense tensor: rank 0 (scalar) to 4, printed as [2, 3, 4].
#pragma once
#include <array>
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <sstream>
#include <string>

#include "sinklab/core/error.hpp"

namespace sinklab {

inline constexpr int kMaxRank = 4;

class Shape {
 public:
  Shape() = default;  // scalar
  Shape(std::initializer_list<int64_t> dims) {
    SINKLAB_CHECK(dims.size() <= kMaxRank, "Shape: rank ", dims.size(), " exceeds the maximum of ", kMaxRank);
    for (int64_t d : dims) {
      SINKLAB_CHECK(d >= 0, "Shape: negative extent ", d);
      dims_[rank_++] = d;
    }
  }
  template <class It>
  static Shape from_range(It first, It last) {
    Shape s;
    for (; first != last; ++first) {
      SINKLAB_CHECK(s.rank_ < kMaxRank, "Shape: rank exceeds the maximum of ", kMaxRank);
      SINKLAB_CHECK(*first >= 0, "Shape: negative extent ", *first);
      s.dims_[s.rank_++] = static_cast<int64_t>(*first);
    }
    return s;
  }

  int rank() const { return rank_; }
  int64_t operator[](int i) const { return dims_[normalize(i)]; }
  int64_t& operator[](int i) { return dims_[normalize(i)]; }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank_; ++i) n *= dims_[i];
    return n;
  }
  // Accepts Python-style negative axes; throws on out-of-range.
  int normalize(int axis) const {
    int a = axis < 0 ? axis + rank_ : axis;
    SINKLAB_CHECK(a >= 0 && a < rank_, "Shape: axis ", axis, " out of range for rank-", rank_, " shape ", str());
    return a;
  }
  const int64_t* begin() const { return dims_.data(); }
  const int64_t* end() const { return dims_.data() + rank_; }

  Shape with(int axis, int64_t extent) const {
    Shape s = *this;
    s[axis] = extent;
    return s;
  }
  Shape without(int axis) const {
    int a = normalize(axis);
    Shape s;
    for (int i = 0; i < rank_; ++i)
      if (i != a) s.dims_[s.rank_++] = dims_[i];
    return s;
  }
  Shape appended(int64_t extent) const {
    SINKLAB_CHECK(rank_ < kMaxRank, "Shape: cannot append to rank-", rank_, " shape ", str());
    Shape s = *this;
    s.dims_[s.rank_++] = extent;
    return s;
  }

  friend bool operator==(const Shape& a, const Shape& b) {
    if (a.rank_ != b.rank_) return false;
    for (int i = 0; i < a.rank_; ++i)
      if (a.dims_[i] != b.dims_[i]) return false;
    return true;
  }
  friend bool operator!=(const Shape& a, const Shape& b) { return !(a == b); }

  std::string str() const {
    std::ostringstream os;
    os << '[';
    for (int i = 0; i < rank_; ++i) os << (i ? ", " : "") << dims_[i];
    os << ']';
    return os.str();
  }
  friend std::ostream& operator<<(std::ostream& os, const Shape& s) { return os << s.str(); }

 private:
  std::array<int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

// Row-major strides of a shape, in elements.
inline std::array<int64_t, kMaxRank> contiguous_strides(const Shape& s) {
  std::array<int64_t, kMaxRank> st{};
  int64_t acc = 1;
  for (int i = s.rank() - 1; i >= 0; --i) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

// f(k, offset) for the k-th element, in row-major order, of a tensor of this shape (rank ≤
// kMaxRank) at the given strides: the one walk behind strided copies, fills and views.
template <class F>
void for_each_strided(const int64_t* shape, const int64_t* strides, int rank, F&& f) {
  if (rank == 0) {
    f(int64_t{0}, int64_t{0});
    return;
  }
  int64_t n = 1;
  for (int d = 0; d < rank; ++d) n *= shape[d];
  std::array<int64_t, kMaxRank> idx{};
  int64_t off = 0;
  for (int64_t k = 0; k < n; ++k) {
    f(k, off);
    for (int d = rank - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) {
        off += strides[d];
        break;
      }
      off -= (shape[d] - 1) * strides[d];
      idx[d] = 0;
    }
  }
}

}  // namespace sinklab
