// The kernels sim registers natively: tensor creation, storage and metadata (views, resize,
// set_), copies and transfers, scalar reads. Every other op reaches the Python fallback (fallback.py),
// which runs it on CPU views of the same memory.
#include "runtime.h"

#include <ATen/EmptyTensor.h>
#include <ATen/ops/_local_scalar_dense_native.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/_to_copy_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/resize_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

namespace sim {
namespace {

constexpr c10::DispatchKeySet kSimKeys{c10::DispatchKey::PrivateUse1};

c10::Device checked_device(std::optional<c10::Device> device, std::optional<c10::Layout> layout,
                           std::optional<bool> pin_memory, c10::ScalarType dtype) {
  auto d = c10::device_or_default(device);
  TORCH_CHECK(d.type() == kSim, "expected a sim device, got ", d);
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided,
              "the sim device holds strided tensors only");
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory), "Only dense CPU tensors can be pinned");
  check_dtype_supported(dtype);
  return d;
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory,
                               std::optional<c10::MemoryFormat> memory_format) {
  auto st = c10::dtype_or_default(dtype);
  c10::DeviceGuard guard(checked_device(device, layout, pin_memory, st));
  return at::detail::empty_generic(size, device_allocator(), kSimKeys, st, memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                         std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                         std::optional<c10::Device> device, std::optional<bool> pin_memory) {
  auto st = c10::dtype_or_default(dtype);
  c10::DeviceGuard guard(checked_device(device, layout, pin_memory, st));
  return at::detail::empty_strided_generic(size, stride, device_allocator(), kSimKeys, st);
}

at::Tensor as_strided(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride,
                      std::optional<int64_t> storage_offset) {
  return at::native::as_strided_tensorimpl(self, size, stride, storage_offset);
}

at::Tensor view(const at::Tensor& self, c10::IntArrayRef size) { return at::native::view(self, size); }

at::Tensor reshape_alias(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride) {
  return at::native::_reshape_alias(self, size, stride);
}

const at::Tensor& resize(const at::Tensor& self, c10::IntArrayRef size,
                         std::optional<c10::MemoryFormat> memory_format) {
  // Host memory: the CPU resize (allocate through the storage's allocator, memcpy) is right.
  return at::native::resize_(self, size, memory_format);
}

at::Tensor& set_storage(at::Tensor& self, c10::Storage source, int64_t offset, c10::IntArrayRef size,
                        c10::IntArrayRef stride) {
  return at::native::set_storage_cpu_(self, std::move(source), offset, size, stride);
}

at::Tensor& set_whole_storage(at::Tensor& self, c10::Storage source) {
  int64_t n = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return set_storage(self, std::move(source), 0, {n}, {});
}

at::Tensor& set_tensor(at::Tensor& self, const at::Tensor& source) {
  if (!self.is_same(source)) {
    set_storage(self, source.storage(), source.storage_offset(), source.sizes(), source.strides());
  }
  return self;
}

at::Tensor& set_empty(at::Tensor& self) {
  c10::Storage empty(c10::Storage::use_byte_size_t(), 0, device_allocator()->allocate(0),
                     device_allocator(), /*resizable=*/true);
  return set_storage(self, std::move(empty), 0, {0}, {});
}

at::Tensor as_cpu(const at::Tensor& t) { return t.device().type() == kSim ? cpu_view(t) : t; }

at::Tensor& copy(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  at::Tensor target = as_cpu(self);
  at::native::copy_(target, as_cpu(src), non_blocking);
  return self;
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  at::Tensor target = as_cpu(dst);
  at::native::copy_(target, as_cpu(self), non_blocking);
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.device().type() == kSim) {
    at::native::resize_(dst, self.sizes(), std::nullopt);
  } else {
    dst.resize_(self.sizes());
  }
  return copy_from(self, dst, false);
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  return at::native::_local_scalar_dense_cpu(cpu_view(self));
}

// A ZeroTensor owns no memory: its data pointer is null, and the ZeroTensor key makes every op
// read it as zeros. Autograd makes one for a gradient known to be zero (`sgn` of a real tensor);
// through the fallback the CPU's ZeroTensor lost that key on the way to sim and became a dense
// tensor over no memory, which crashed the first read.
struct NoMemoryAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t) override {
    return {nullptr, nullptr, &no_delete, c10::Device(kSim, current_device())};  // the caller's DeviceGuard
  }
  void copy_data(void*, const void*, std::size_t) const override {}
  static void no_delete(void*) {}
};

at::Tensor efficient_zero_tensor(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                                 std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                                 std::optional<bool> pin_memory) {
  static NoMemoryAllocator allocator;
  auto st = c10::dtype_or_default(dtype);
  c10::DeviceGuard guard(checked_device(device, layout, pin_memory, st));
  auto keys = kSimKeys | c10::DispatchKeySet(c10::DispatchKey::ZeroTensor);
  return at::detail::empty_generic(size, &allocator, keys, st, std::nullopt);
}

// Module.to(device) keeps a parameter object (and so every weight tied to it: an LM head shared
// with its embeddings) only when the CPU and device tensors are "shallow-copy compatible".
// PyTorch's own answer counts in-tree backends only, so a PrivateUse1 backend answers for itself;
// otherwise every parameter is replaced by a new one and tied weights come apart on the device.
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  auto dense = [](const at::Tensor& t) {
    return t.layout() == c10::Layout::Strided && !t.is_nested() && (t.is_cpu() || t.device().type() == kSim);
  };
  return (dense(self) && dense(from)) ||
         self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set());
}

at::Tensor detach(const at::Tensor& self) {
  return at::native::as_strided_tensorimpl(self, self.sizes(), self.strides(), self.storage_offset());
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("empty_strided", empty_strided);
  m.impl("_efficientzerotensor", efficient_zero_tensor);
  m.impl("as_strided", as_strided);
  m.impl("view", view);
  m.impl("_reshape_alias", reshape_alias);
  m.impl("resize_", resize);
  m.impl("set_.source_Storage_storage_offset", set_storage);
  m.impl("set_.source_Storage", set_whole_storage);
  m.impl("set_.source_Tensor", set_tensor);
  m.impl("set_", set_empty);
  m.impl("_copy_from", copy_from);
  // Transfers stay in C++ (the harness moves every sample both ways); `_to_copy` is ATen's
  // own composite (allocate, then copy_), registered here so the fallback does not take it.
  m.impl("copy_", copy);
  m.impl("_to_copy", at::native::_to_copy);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
  m.impl("_local_scalar_dense", local_scalar_dense);
  m.impl("_has_compatible_shallow_copy_type", has_compatible_shallow_copy_type);
}

} // namespace sim
