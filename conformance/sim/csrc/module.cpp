// The Python face of the sim runtime (imported as conformance.sim._native by native.py).
#include "runtime.h"

#include <torch/csrc/Generator.h>
#include <torch/csrc/utils/pybind.h>

namespace {

uint64_t dtype_mask(const std::vector<c10::ScalarType>& dtypes) {
  uint64_t mask = 0;
  for (auto d : dtypes) mask |= uint64_t(1) << static_cast<int>(d);
  return mask;
}

} // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("cpu_view", &sim::cpu_view);
  m.def("adopt", &sim::adopt);
  m.def("alias_of", &sim::alias_of);
  m.def("shares_memory", &sim::shares_memory);
  m.def("sync_written", &sim::sync_written);
  m.def("set_device_count", &sim::set_device_count);
  m.def("device_count", [] { return int(sim::device_count()); });
  m.def("current_device", [] { return int(sim::current_device()); });
  m.def("set_current_device", [](int i) { sim::set_current_device(static_cast<c10::DeviceIndex>(i)); });
  m.def("set_refused_dtypes", [](const std::vector<c10::ScalarType>& d) { sim::set_refused_dtypes(dtype_mask(d)); });
  m.def("set_event_time_scale", &sim::set_event_time_scale);
  m.def("default_generator", [](int i) {
    return py::reinterpret_steal<py::object>(
        THPGenerator_initDefaultGenerator(sim::default_generator(static_cast<c10::DeviceIndex>(i))));
  });
  m.def("enter_rng", &sim::enter_rng);
  m.def("leave_rng", &sim::leave_rng);
}
