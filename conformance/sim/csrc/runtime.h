// The sim device's runtime: host-memory allocator with statistics, streams, events,
// generators, and the CPU views through which every kernel reaches device memory.
#pragma once

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Tensor.h>
#include <c10/core/CachingDeviceAllocator.h>

namespace sim {

constexpr c10::DeviceType kSim = c10::DeviceType::PrivateUse1;

// How many sim devices this process has (the profile's `devices`, default 1). Fixed once a
// tensor exists.
void set_device_count(int count);
c10::DeviceIndex device_count();
c10::DeviceIndex current_device();
void set_current_device(c10::DeviceIndex index);
void check_index(c10::DeviceIndex index);

// Dtypes the active profile refuses (a bit per ScalarType): factories refuse them like ops do.
void set_refused_dtypes(uint64_t mask);
void check_dtype_supported(c10::ScalarType dtype);

// The event_timing fault: elapsed times are multiplied by this.
void set_event_time_scale(double scale);

c10::DeviceAllocator* device_allocator();
c10::Allocator* pinned_allocator();
bool is_pinned(const void* data);

// A CPU tensor over the memory of sim tensor `t` (same sizes, strides, offset, conj/neg bits).
at::Tensor cpu_view(const at::Tensor& t);
// A sim tensor holding CPU tensor `t`'s memory, without copying (the sim tensor keeps it alive).
at::Tensor adopt(const at::Tensor& t, c10::DeviceIndex index);
// A sim tensor with `cpu`'s dtype and geometry over `base`'s storage (`cpu` viewed base's memory).
at::Tensor alias_of(const at::Tensor& base, const at::Tensor& cpu);
// After a kernel wrote through `cpu` (a view of `t`), make `t` follow a resize or restride.
void sync_written(const at::Tensor& t, const at::Tensor& cpu);
bool shares_memory(const at::Tensor& t, const at::Tensor& cpu);

struct SimGenerator : public at::CPUGeneratorImpl {
  explicit SimGenerator(c10::DeviceIndex index);
 private:
  SimGenerator* clone_impl() const override;
};
const at::Generator& default_generator(c10::DeviceIndex index);

// Run a seeded CPU kernel on `gen`'s stream of numbers: its state is swapped into the CPU
// default generator until `leave_rng` (nested calls stack).
void enter_rng(const at::Generator& gen);
void leave_rng();

} // namespace sim
