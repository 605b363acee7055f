// Tensor<T, Device>: dense, row-major, rank 0-4, shared storage, cheap strided views.
//
// The Device's memory<Device> (core/device.hpp) allocates, copies and fills; nothing here touches an
// element except through it, so the same class holds cpu and device buffers. Element access by
// index (operator(), arange, to<U>) needs memory the host can read.
//
// Copies of a Tensor share storage (like a shared_ptr); clone() makes a deep copy.
// Views (slice, select, transpose, view) share storage and may be non-contiguous;
// kernels call contiguous(), which copies only when it has to.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <ostream>
#include <type_traits>
#include <vector>

#include "sinklab/core/device.hpp"
#include "sinklab/core/error.hpp"
#include "sinklab/core/parallel.hpp"
#include "sinklab/core/shape.hpp"
#include "sinklab/core/storage.hpp"

namespace sinklab {

template <class T, class Device = cpu>
class Tensor {
  using Memory = memory<Device>;
  static_assert(std::is_arithmetic_v<T>, "Tensor element type must be arithmetic");

 public:
  using value_type = T;
  using device_type = Device;
  using Strides = std::array<int64_t, kMaxRank>;

  Tensor() = default;  // undefined: holds no storage

  // Zero-initialised tensor of the given shape.
  explicit Tensor(const Shape& shape) : Tensor(empty(shape)) { fill(T(0)); }

  static Tensor empty(const Shape& shape) {
    Tensor t;
    t.shape_ = shape;
    t.strides_ = contiguous_strides(shape);
    t.storage_ = Memory::template allocate<T>(static_cast<std::size_t>(std::max<int64_t>(shape.numel(), 1)));
    return t;
  }
  static Tensor zeros(const Shape& shape) { return Tensor(shape); }
  static Tensor full(const Shape& shape, T v) {
    Tensor t = empty(shape);
    t.fill(v);
    return t;
  }
  static Tensor ones(const Shape& shape) { return full(shape, T(1)); }
  static Tensor scalar(T v) { return full(Shape{}, v); }
  static Tensor from(const Shape& shape, const std::vector<T>& values) {
    SINKLAB_CHECK(static_cast<int64_t>(values.size()) == shape.numel(), "Tensor::from: ", values.size(),
                  " values for shape ", shape, " (expected ", shape.numel(), ")");
    Tensor t = empty(shape);
    Memory::from_host(t.data(), values.data(), values.size());
    return t;
  }
  static Tensor from(const Shape& shape, std::initializer_list<T> values) {
    return from(shape, std::vector<T>(values));
  }
  // Consecutive values start, start+1, ... (handy in tests).
  static Tensor arange(const Shape& shape, T start = T(0)) {
    std::vector<T> v(static_cast<std::size_t>(shape.numel()));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = start + static_cast<T>(i);
    return from(shape, v);
  }

  bool defined() const { return static_cast<bool>(storage_); }
  const Shape& shape() const { return shape_; }
  int rank() const { return shape_.rank(); }
  int64_t size(int axis) const { return shape_[axis]; }
  int64_t numel() const { return shape_.numel(); }
  const Strides& strides() const { return strides_; }
  int64_t stride(int axis) const { return strides_[shape_.normalize(axis)]; }
  bool is_contiguous() const {
    int64_t expect = 1;
    for (int i = rank() - 1; i >= 0; --i) {
      if (shape_[i] != 1 && strides_[i] != expect) return false;
      expect *= shape_[i];
    }
    return true;
  }
  // True when both tensors view the same first element of the same buffer.
  bool shares_storage_with(const Tensor& o) const { return storage_ == o.storage_; }
  // True when no other tensor or view refers to this buffer (so it may be adopted in place).
  bool unique_storage() const { return storage_.use_count() == 1; }

  T* data() { return storage_.get() + offset_; }
  const T* data() const { return storage_.get() + offset_; }

  template <class... I>
    requires HostDevice<Device>
  T& operator()(I... idx) {
    return data()[index_of(idx...)];
  }
  template <class... I>
    requires HostDevice<Device>
  const T& operator()(I... idx) const {
    return data()[index_of(idx...)];
  }
  // Value of a one-element tensor (copied to the host).
  T item() const {
    SINKLAB_CHECK(numel() == 1, "Tensor::item: tensor of shape ", shape_, " has ", numel(), " elements, expected 1");
    T v;
    Memory::to_host(&v, data(), 1);
    return v;
  }

  void fill(T v) {
    if (is_contiguous())
      Memory::fill(data(), static_cast<std::size_t>(numel()), v);
    else
      copy_from(full(shape_, v));
  }

  // Same data, new shape; requires a contiguous tensor (see reshape()).
  Tensor view(const Shape& s) const {
    SINKLAB_CHECK(s.numel() == numel(), "Tensor::view: cannot view shape ", shape_, " (", numel(),
                  " elements) as ", s, " (", s.numel(), " elements)");
    SINKLAB_CHECK(is_contiguous(), "Tensor::view: tensor of shape ", shape_,
                  " is not contiguous; use reshape(), which copies");
    Tensor t = *this;
    t.shape_ = s;
    t.strides_ = contiguous_strides(s);
    return t;
  }
  Tensor reshape(const Shape& s) const { return contiguous().view(s); }

  Tensor transpose(int a, int b) const {
    a = shape_.normalize(a);
    b = shape_.normalize(b);
    Tensor t = *this;
    std::swap(t.shape_[a], t.shape_[b]);
    std::swap(t.strides_[a], t.strides_[b]);
    return t;
  }
  // Elements [start, end) along an axis, as a view.
  Tensor slice(int axis, int64_t start, int64_t end) const {
    axis = shape_.normalize(axis);
    SINKLAB_CHECK(0 <= start && start <= end && end <= shape_[axis], "Tensor::slice: range [", start, ", ", end,
                  ") out of bounds for axis ", axis, " of shape ", shape_);
    Tensor t = *this;
    t.offset_ += start * strides_[axis];
    t.shape_[axis] = end - start;
    return t;
  }
  // Index i along an axis, dropping that axis, as a view.
  Tensor select(int axis, int64_t i) const {
    axis = shape_.normalize(axis);
    SINKLAB_CHECK(0 <= i && i < shape_[axis], "Tensor::select: index ", i, " out of bounds for axis ", axis,
                  " of shape ", shape_);
    Tensor t;
    t.storage_ = storage_;
    t.offset_ = offset_ + i * strides_[axis];
    t.shape_ = shape_.without(axis);
    for (int k = 0, j = 0; k < rank(); ++k)
      if (k != axis) t.strides_[j++] = strides_[k];
    return t;
  }

  Tensor contiguous() const {
    if (is_contiguous()) return *this;
    return clone();
  }
  Tensor clone() const {
    Tensor t = empty(shape_);
    copy_to_contiguous(t.data());
    return t;
  }
  // Copies values from a tensor of the same shape (any strides) into this one.
  void copy_from(const Tensor& src) {
    SINKLAB_CHECK(src.shape() == shape_, "Tensor::copy_from: source shape ", src.shape(),
                  " does not match destination shape ", shape_);
    if (is_contiguous()) {
      src.copy_to_contiguous(data());
    } else {
      const Tensor c = src.contiguous();
      Memory::scatter(data(), c.data(), shape_.begin(), strides_.data(), rank());
    }
  }
  template <class U>
    requires HostDevice<Device>
  Tensor<U, Device> to() const {
    Tensor<U, Device> out = Tensor<U, Device>::empty(shape_);
    Tensor c = contiguous();
    const T* s = c.data();
    U* d = out.data();
    for (int64_t i = 0; i < numel(); ++i) d[i] = static_cast<U>(s[i]);
    return out;
  }
  // The tensor on device To: a dense copy (through host memory when neither side is the host),
  // or this tensor itself, sharing storage, when it is already there; undefined stays undefined.
  template <class To>
  Tensor<T, To> to_device() const {
    if (!defined()) return {};
    if constexpr (std::is_same_v<To, Device>) {
      return *this;
    } else {
      Tensor<T, To> out = Tensor<T, To>::empty(shape_);
      const auto n = static_cast<std::size_t>(numel());
      if constexpr (HostDevice<Device>) {
        memory<To>::from_host(out.data(), contiguous().data(), n);
      } else if constexpr (HostDevice<To>) {
        Memory::to_host(out.data(), contiguous().data(), n);
      } else {
        memory<To>::from_host(out.data(), to_vector().data(), n);
      }
      return out;
    }
  }
  std::vector<T> to_vector() const {
    const Tensor c = contiguous();
    std::vector<T> v(static_cast<std::size_t>(numel()));
    Memory::to_host(v.data(), c.data(), v.size());
    return v;
  }

  // Visits the storage offset (relative to data()) of every element in row-major order.
  template <class F>
  void for_each_offset(F&& f) const {
    for_each_strided(shape_.begin(), strides_.data(), rank(), [&f](int64_t, int64_t off) { f(off); });
  }

 private:
  template <class... I>
  int64_t index_of(I... idx) const {
    static_assert(sizeof...(I) <= kMaxRank, "too many indices");
    SINKLAB_CHECK(static_cast<int>(sizeof...(I)) == rank(), "Tensor: ", sizeof...(I),
                  " indices for a rank-", rank(), " tensor of shape ", shape_);
    const int64_t ii[] = {static_cast<int64_t>(idx)..., 0};
    int64_t off = 0;
    for (int d = 0; d < static_cast<int>(sizeof...(I)); ++d) {
      SINKLAB_CHECK(ii[d] >= 0 && ii[d] < shape_[d], "Tensor: index ", ii[d], " out of bounds for axis ", d,
                    " of shape ", shape_);
      off += ii[d] * strides_[d];
    }
    return off;
  }
  void copy_to_contiguous(T* dst) const {
    if (is_contiguous())
      Memory::copy(dst, data(), static_cast<std::size_t>(numel()));
    else
      Memory::gather(dst, data(), shape_.begin(), strides_.data(), rank());
  }

  std::shared_ptr<T[]> storage_;
  int64_t offset_ = 0;
  Shape shape_;
  Strides strides_{};

  template <class, class>
  friend class Tensor;
};

template <class T, class Device>
std::ostream& operator<<(std::ostream& os, const Tensor<T, Device>& t) {
  os << "Tensor" << t.shape() << " {";
  auto v = t.to_vector();
  for (std::size_t i = 0; i < v.size() && i < 16; ++i) os << (i ? ", " : "") << v[i];
  if (v.size() > 16) os << ", ...";
  return os << '}';
}

}  // namespace sinklab
