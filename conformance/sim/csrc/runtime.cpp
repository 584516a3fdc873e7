#include "runtime.h"

#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/ops/zeros.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/impl/alloc_cpu.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <unordered_set>
#include <vector>

namespace sim {
namespace {

using c10::DeviceIndex;
using c10::CachingAllocator::StatType;

constexpr int kMaxDevices = 16;
std::atomic<int> g_device_count{1};
std::atomic<uint64_t> g_refused_dtypes{0};
std::atomic<double> g_event_time_scale{1.0};
thread_local DeviceIndex t_device = 0;

// A device or stream named without an index ("sim") means the current device.
DeviceIndex resolve(DeviceIndex index) { return index < 0 ? t_device : index; }
c10::Device resolve(c10::Device d) { return c10::Device(d.type(), resolve(d.index())); }

// ---- allocator ---------------------------------------------------------------------------

using DeviceStats = c10::CachingDeviceAllocator::DeviceStats;
constexpr size_t kAll = static_cast<size_t>(StatType::AGGREGATE);

// Every statistic sim keeps: byte sums and block counts (one block per allocation).
template <typename Fn>
void for_each_stat(DeviceStats& s, Fn fn) {
  for (auto* arr : {&s.allocated_bytes, &s.reserved_bytes, &s.active_bytes, &s.requested_bytes}) fn(*arr, true);
  for (auto* arr : {&s.allocation, &s.segment, &s.active}) fn(*arr, false);
}

struct Stats {
  std::mutex mu;
  DeviceStats stats[kMaxDevices];

  void add(DeviceIndex d, size_t n) {
    std::lock_guard<std::mutex> g(mu);
    for_each_stat(stats[d], [n](auto& arr, bool bytes) { arr[kAll].increase(bytes ? n : 1); });
  }
  void remove(DeviceIndex d, size_t n) {
    std::lock_guard<std::mutex> g(mu);
    for_each_stat(stats[d], [n](auto& arr, bool bytes) { arr[kAll].decrease(bytes ? n : 1); });
  }
};
Stats g_stats;

// What a sim DataPtr owns: its bytes (for the statistics) and, for adopted memory, the CPU
// storage that holds them.
struct Block {
  size_t bytes;
  DeviceIndex device;
  c10::Storage adopted;  // empty for memory the allocator made
};

struct Memory {
  void* data;
  Block* block;
};

void free_owned(void* ctx) {
  auto* m = static_cast<Memory*>(ctx);
  g_stats.remove(m->block->device, m->block->bytes);
  c10::free_cpu(m->data);
  delete m->block;
  delete m;
}

void free_adopted(void* ctx) {
  auto* block = static_cast<Block*>(ctx);
  g_stats.remove(block->device, block->bytes);
  delete block;
}

class HostDeviceAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    DeviceIndex d = t_device;
    void* data = n ? c10::alloc_cpu(n) : nullptr;
    auto* m = new Memory{data, new Block{n, d, {}}};
    g_stats.add(d, n);
    return {data, m, &free_owned, c10::Device(kSim, d)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
  bool initialized() override { return true; }
  void emptyCache(c10::MempoolId_t) override {}
  void recordStream(const c10::DataPtr&, c10::Stream) override {}
  DeviceStats getDeviceStats(DeviceIndex d) override {
    check_index(d);
    d = resolve(d);
    std::lock_guard<std::mutex> g(g_stats.mu);
    return g_stats.stats[d];
  }
  void resetAccumulatedStats(DeviceIndex d) override {
    check_index(d);
    d = resolve(d);
    std::lock_guard<std::mutex> g(g_stats.mu);
    for_each_stat(g_stats.stats[d], [](auto& arr, bool) { for (auto& stat : arr) stat.reset_accumulated(); });
  }
  void resetPeakStats(DeviceIndex d) override {
    check_index(d);
    d = resolve(d);
    std::lock_guard<std::mutex> g(g_stats.mu);
    for_each_stat(g_stats.stats[d], [](auto& arr, bool) { for (auto& stat : arr) stat.reset_peak(); });
  }
  std::pair<size_t, size_t> getMemoryInfo(DeviceIndex d) override {
    check_index(d);
    return {size_t(8) << 30, size_t(16) << 30};  // a nominal 16 GiB device, half free
  }
};
HostDeviceAllocator g_allocator;

// Pinned host memory: CPU memory whose pointers sim remembers, so `is_pinned` can say so.
std::mutex g_pinned_mu;
std::unordered_set<const void*> g_pinned;

void free_pinned(void* data) {
  {
    std::lock_guard<std::mutex> g(g_pinned_mu);
    g_pinned.erase(data);
  }
  c10::free_cpu(data);
}

class PinnedAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    void* data = n ? c10::alloc_cpu(n) : nullptr;
    if (data) {
      std::lock_guard<std::mutex> g(g_pinned_mu);
      g_pinned.insert(data);
    }
    return {data, data, &free_pinned, c10::Device(c10::kCPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_pinned; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};
PinnedAllocator g_pinned_allocator;

// ---- streams and events ------------------------------------------------------------------

// Sim runs every kernel synchronously, so a stream is only an id: ordering holds trivially,
// and an event's timestamp is taken when it is recorded.
std::atomic<int64_t> g_next_stream{1};
constexpr int kPoolSize = 32;
std::atomic<uint32_t> g_pool_next[kMaxDevices];
thread_local c10::StreamId t_stream[kMaxDevices] = {};

struct Event {
  bool recorded = false;
  bool timing = false;
  int64_t time_ns = 0;
};

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct SimGuard final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kSim; }
  c10::Device exchangeDevice(c10::Device d) const override {
    auto old = getDevice();
    if (d.index() != old.index()) setDevice(d);
    return old;
  }
  c10::Device getDevice() const override { return c10::Device(kSim, t_device); }
  void setDevice(c10::Device d) const override {
    check_index(d.index());
    t_device = resolve(d.index());
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override { t_device = resolve(d.index()); }
  c10::Stream getStream(c10::Device d) const override {
    d = resolve(d);
    return c10::Stream(c10::Stream::UNSAFE, d, t_stream[d.index()]);
  }
  c10::Stream getDefaultStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::DEFAULT, resolve(d));
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool) const override {
    d = resolve(d);
    check_index(d.index());
    auto slot = g_pool_next[d.index()].fetch_add(1) % kPoolSize;
    return c10::Stream(c10::Stream::UNSAFE, d, 1 + slot);
  }
  c10::Stream getNewStream(c10::Device d, int) const override {
    d = resolve(d);
    check_index(d.index());
    return c10::Stream(c10::Stream::UNSAFE, d, kPoolSize + g_next_stream.fetch_add(1));
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    auto old = getStream(s.device());
    t_stream[resolve(s.device_index())] = s.id();
    return old;
  }
  DeviceIndex deviceCount() const noexcept override { return g_device_count.load(); }
  void destroyEvent(void* event, const DeviceIndex) const noexcept override {
    delete static_cast<Event*>(event);
  }
  void record(void** event, const c10::Stream& stream, const DeviceIndex index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(index == -1 || resolve(index) == resolve(stream.device_index()), "Event device index ", index,
                " does not match recording stream's device index ", stream.device_index(), ".");
    if (*event == nullptr) {
      auto* e = new Event();
      e->timing = flag == c10::EventFlag::BACKEND_DEFAULT;
      *event = e;
    }
    auto* e = static_cast<Event*>(*event);
    e->recorded = true;
    e->time_ns = now_ns();
  }
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void*) const override { return true; }
  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream&) const override {}
  void synchronizeEvent(void*) const override {}
  void synchronizeDevice(const DeviceIndex index) const override { check_index(index); }
  void recordDataPtrOnStream(const c10::DataPtr&, const c10::Stream&) const override {}
  double elapsedTime(void* start, void* end, const DeviceIndex) const override {
    auto* a = static_cast<Event*>(start);
    auto* b = static_cast<Event*>(end);
    TORCH_CHECK(a && b && a->recorded && b->recorded,
                "Both events must be recorded before calculating elapsed time.");
    TORCH_CHECK(a->timing && b->timing,
                "Both events must be created with argument 'enable_timing=True'.");
    return double(b->time_ns - a->time_ns) / 1e6 * g_event_time_scale.load();
  }
};

// ---- generators --------------------------------------------------------------------------

std::once_flag g_generators_once;
std::vector<at::Generator> g_generators;

struct SavedCpuState {
  at::mt19937 engine;
  std::optional<float> next_float;
  std::optional<double> next_double;
  at::CPUGeneratorImpl* source;
};
thread_local std::vector<SavedCpuState> t_rng_stack;

// ---- hooks -------------------------------------------------------------------------------

struct Hooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return true; }
  const at::Generator& getDefaultGenerator(DeviceIndex index) const override {
    return default_generator(index);
  }
  at::Generator getNewGenerator(DeviceIndex index) const override {
    return at::make_generator<SimGenerator>(index < 0 ? current_device() : index);
  }
  at::Device getDeviceFromPtr(void*) const override { return c10::Device(kSim, current_device()); }
  bool isPinnedPtr(const void* data) const override { return is_pinned(data); }
  c10::Allocator* getPinnedMemoryAllocator() const override { return &g_pinned_allocator; }
  bool hasPrimaryContext(DeviceIndex) const override { return true; }
  DeviceIndex deviceCount() const override { return sim::device_count(); }
  void setCurrentDevice(DeviceIndex index) const override { set_current_device(index); }
  DeviceIndex getCurrentDevice() const override { return current_device(); }
  DeviceIndex exchangeDevice(DeviceIndex index) const override {
    auto old = current_device();
    set_current_device(index);
    return old;
  }
  DeviceIndex maybeExchangeDevice(DeviceIndex index) const override { return exchangeDevice(index); }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    auto* impl = storage.unsafeGetStorageImpl();
    TORCH_CHECK(impl->resizable(), "Trying to resize storage that is not resizable");
    c10::DataPtr fresh = g_allocator.allocate(newsize);
    size_t keep = std::min(newsize, impl->nbytes());
    if (keep) std::memcpy(fresh.get(), impl->data(), keep);
    impl->set_data_ptr_noswap(std::move(fresh));
    impl->set_nbytes(newsize);
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, SimGuard);

struct Registration {
  Registration() {
    c10::SetAllocator(kSim, &g_allocator);
    at::RegisterPrivateUse1HooksInterface(new Hooks());
  }
};
Registration g_registration;

c10::DispatchKeySet sim_keys() { return c10::DispatchKeySet(c10::DispatchKey::PrivateUse1); }

} // namespace

void set_device_count(int count) {
  TORCH_CHECK(count >= 1 && count <= kMaxDevices, "the sim profile's devices must be 1 to ",
              kMaxDevices, ", got ", count);
  g_device_count = count;
}
DeviceIndex device_count() { return g_device_count.load(); }
DeviceIndex current_device() { return t_device; }
void set_current_device(DeviceIndex index) {
  check_index(index);
  t_device = resolve(index);
}
void check_index(DeviceIndex index) {
  TORCH_CHECK(index >= -1 && index < g_device_count.load(), "Invalid device index ", int(index),
              ": the sim backend has ", int(g_device_count.load()), " device(s)");
}

void set_refused_dtypes(uint64_t mask) { g_refused_dtypes = mask; }
void check_dtype_supported(c10::ScalarType dtype) {
  if (!(g_refused_dtypes.load() & (uint64_t(1) << static_cast<int>(dtype)))) return;
  std::string py(c10::getDtypeNames(dtype).first);
  TORCH_CHECK(false, "Cannot convert a sim Tensor to ", py, " dtype as the sim device doesn't support ",
              py, ": dtype ", py, " is not supported on the sim backend.");
}
void set_event_time_scale(double scale) { g_event_time_scale = scale; }

c10::DeviceAllocator* device_allocator() { return &g_allocator; }
c10::Allocator* pinned_allocator() { return &g_pinned_allocator; }
bool is_pinned(const void* data) {
  std::lock_guard<std::mutex> g(g_pinned_mu);
  return g_pinned.count(data) > 0;
}

namespace {
void drop_storage(void* ctx) { delete static_cast<c10::Storage*>(ctx); }

at::Tensor make_like(c10::Storage storage, c10::DispatchKeySet keys, const at::Tensor& geometry) {
  auto out = at::detail::make_tensor<c10::TensorImpl>(std::move(storage), keys, geometry.dtype());
  auto* impl = out.unsafeGetTensorImpl();
  impl->set_sizes_and_strides(geometry.sizes(), geometry.strides(), geometry.storage_offset());
  if (geometry.is_conj()) impl->_set_conj(true);
  if (geometry.is_neg()) impl->_set_neg(true);
  return out;
}
} // namespace

at::Tensor cpu_view(const at::Tensor& t) {
  if (t._is_zerotensor()) {
    // No memory behind it (kernels.cpp, _efficientzerotensor): read-only zeros, as PyTorch's
    // ZeroTensor fallback materialises it for a kernel.
    return at::zeros({}, t.options().device(c10::kCPU)).expand(t.sizes());
  }
  const auto& storage = t.storage();
  // Resizable with the CPU allocator: a kernel that resizes an out= argument gets new CPU
  // memory, and sync_written moves it into the sim tensor.
  c10::DataPtr data(storage.mutable_data(), new c10::Storage(storage), &drop_storage,
                    c10::Device(c10::kCPU));
  c10::Storage view(c10::Storage::use_byte_size_t(), storage.nbytes(), std::move(data),
                    c10::GetCPUAllocator(), /*resizable=*/true);
  return make_like(std::move(view), c10::DispatchKeySet(c10::DispatchKey::CPU), t);
}

static c10::DataPtr adopt_data(const c10::Storage& cpu, DeviceIndex index) {
  size_t n = cpu.nbytes();
  g_stats.add(index, n);
  return {cpu.mutable_data(), new Block{n, index, cpu}, &free_adopted, c10::Device(kSim, index)};
}

at::Tensor adopt(const at::Tensor& t, DeviceIndex index) {
  if (t._is_zerotensor()) {  // a CPU kernel's ZeroTensor has no memory to adopt
    return adopt(at::zeros(t.sizes(), t.options()), index);
  }
  check_index(index);
  index = resolve(index);
  check_dtype_supported(t.scalar_type());
  const auto& cpu = t.storage();
  c10::Storage storage(c10::Storage::use_byte_size_t(), cpu.nbytes(), adopt_data(cpu, index),
                       &g_allocator, /*resizable=*/true);
  return make_like(std::move(storage), sim_keys(), t);
}

at::Tensor alias_of(const at::Tensor& base, const at::Tensor& cpu) {
  // A view, made the way CPU view kernels make theirs: the base's keys (an inference tensor's
  // view is one, a normal tensor's view made in inference mode is not), its storage.
  auto keys = base.key_set().remove(c10::DispatchKey::Conjugate).remove(c10::DispatchKey::Negative);
  auto out = at::detail::make_tensor<c10::TensorImpl>(c10::TensorImpl::VIEW, c10::Storage(base.storage()),
                                                      keys, cpu.dtype());
  auto* impl = out.unsafeGetTensorImpl();
  impl->set_sizes_and_strides(cpu.sizes(), cpu.strides(), cpu.storage_offset());
  if (cpu.is_conj()) impl->_set_conj(true);
  if (cpu.is_neg()) impl->_set_neg(true);
  return out;
}

bool shares_memory(const at::Tensor& t, const at::Tensor& cpu) {
  return t.storage().data() == cpu.storage().data() && t.storage().data() != nullptr;
}

void sync_written(const at::Tensor& t, const at::Tensor& cpu) {
  auto* impl = t.unsafeGetTensorImpl();
  if (!shares_memory(t, cpu) && cpu.storage().nbytes() != 0) {
    // The kernel resized its output: the sim storage takes over the CPU memory, so every
    // view of it sees the new memory, as after a device reallocation.
    auto* storage = t.storage().unsafeGetStorageImpl();
    storage->set_data_ptr_noswap(adopt_data(cpu.storage(), t.device().index()));
    storage->set_nbytes(cpu.storage().nbytes());
  }
  if (t.sizes() != cpu.sizes() || t.strides() != cpu.strides() ||
      t.storage_offset() != cpu.storage_offset()) {
    impl->set_sizes_and_strides(cpu.sizes(), cpu.strides(), cpu.storage_offset());
  }
}

SimGenerator::SimGenerator(DeviceIndex index) : at::CPUGeneratorImpl(c10::default_rng_seed_val) {
  device_ = c10::Device(kSim, index);
  key_set_ = sim_keys();
}

SimGenerator* SimGenerator::clone_impl() const {
  auto* copy = new SimGenerator(device_.index());
  copy->set_engine(const_cast<SimGenerator*>(this)->engine());
  copy->set_next_float_normal_sample(const_cast<SimGenerator*>(this)->next_float_normal_sample());
  copy->set_next_double_normal_sample(const_cast<SimGenerator*>(this)->next_double_normal_sample());
  return copy;
}

const at::Generator& default_generator(DeviceIndex index) {
  std::call_once(g_generators_once, [] {
    for (int i = 0; i < kMaxDevices; ++i) {
      g_generators.push_back(at::make_generator<SimGenerator>(static_cast<DeviceIndex>(i)));
      g_generators.back().set_current_seed(c10::default_rng_seed_val);
    }
  });
  check_index(index);
  return g_generators[resolve(index)];
}

void enter_rng(const at::Generator& gen) {
  TORCH_CHECK(gen.device().type() == kSim, "expected a sim generator, got one on ", gen.device());
  auto* source = static_cast<at::CPUGeneratorImpl*>(gen.unsafeGetGeneratorImpl());
  auto* cpu = at::check_generator<at::CPUGeneratorImpl>(at::detail::getDefaultCPUGenerator());
  std::scoped_lock lock(cpu->mutex_, source->mutex_);
  t_rng_stack.push_back({cpu->engine(), cpu->next_float_normal_sample(),
                         cpu->next_double_normal_sample(), source});
  cpu->set_engine(source->engine());
  cpu->set_next_float_normal_sample(source->next_float_normal_sample());
  cpu->set_next_double_normal_sample(source->next_double_normal_sample());
}

void leave_rng() {
  TORCH_CHECK(!t_rng_stack.empty(), "leave_rng without enter_rng");
  auto saved = t_rng_stack.back();
  t_rng_stack.pop_back();
  auto* cpu = at::check_generator<at::CPUGeneratorImpl>(at::detail::getDefaultCPUGenerator());
  std::scoped_lock lock(cpu->mutex_, saved.source->mutex_);
  saved.source->set_engine(cpu->engine());
  saved.source->set_next_float_normal_sample(cpu->next_float_normal_sample());
  saved.source->set_next_double_normal_sample(cpu->next_double_normal_sample());
  cpu->set_engine(saved.engine);
  cpu->set_next_float_normal_sample(saved.next_float);
  cpu->set_next_double_normal_sample(saved.next_double);
}

} // namespace sim
