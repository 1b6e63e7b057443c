// The GPU clock sampler of `nibble bench` (clock_monitor.hpp). NVML's C functions are declared here
// from the NVML API reference (return code 0 = NVML_SUCCESS, NVML_CLOCK_SM = 1, powers in milliwatts)
// and looked up with dlsym, so nibble neither needs NVML's header nor links the library.
#include "clock_monitor.hpp"

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <chrono>

namespace nibble::engine {

struct ClockMonitor::Nvml {
  using Device = void*;  // nvmlDevice_t: an opaque handle
  void* lib = nullptr;
  int (*init)() = nullptr;
  int (*shutdown)() = nullptr;
  int (*by_pci)(const char*, Device*) = nullptr;
  int (*clock)(Device, int, unsigned*) = nullptr;
  int (*power)(Device, unsigned*) = nullptr;
  int (*reasons)(Device, unsigned long long*) = nullptr;
  int (*driver)(char*, unsigned) = nullptr;  // nvmlSystemGetDriverVersion (optional)
  Device device = nullptr;
  bool initialised = false;
  bool has_power = true;

  ~Nvml() {
    if (initialised) shutdown();
    if (lib) dlclose(lib);
  }
  template <class F>
  bool find(F& f, const char* name) {
    f = reinterpret_cast<F>(dlsym(lib, name));
    return f != nullptr;
  }
  // "" when ready to sample, else why not.
  std::string open(int cuda_device) {
    lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return fmt::format("NVML not loaded ({})", dlerror());
    if (!find(init, "nvmlInit_v2") || !find(shutdown, "nvmlShutdown") ||
        !find(by_pci, "nvmlDeviceGetHandleByPciBusId_v2") || !find(clock, "nvmlDeviceGetClockInfo") ||
        !find(power, "nvmlDeviceGetPowerUsage"))
      return "NVML lacks a function nibble needs (nvmlInit_v2, nvmlDeviceGetHandleByPciBusId_v2, "
             "nvmlDeviceGetClockInfo, nvmlDeviceGetPowerUsage)";
    // The current name first; drivers before R535 only have the older one.
    if (!find(reasons, "nvmlDeviceGetCurrentClocksEventReasons") &&
        !find(reasons, "nvmlDeviceGetCurrentClocksThrottleReasons"))
      return "NVML has neither nvmlDeviceGetCurrentClocksEventReasons nor nvmlDeviceGetCurrentClocksThrottleReasons";
    find(driver, "nvmlSystemGetDriverVersion");
    if (const int rc = init(); rc != 0) return fmt::format("nvmlInit_v2 returned {}", rc);
    initialised = true;
    char bus[32] = {};
    if (cudaDeviceGetPCIBusId(bus, sizeof bus, cuda_device) != cudaSuccess) {
      cudaGetLastError();
      return fmt::format("cudaDeviceGetPCIBusId failed for CUDA device {}", cuda_device);
    }
    if (const int rc = by_pci(bus, &device); rc != 0)
      return fmt::format("NVML does not know the GPU at PCI bus id {} (code {})", bus, rc);
    unsigned mhz = 0;
    if (const int rc = clock(device, 1, &mhz); rc != 0)
      return fmt::format("nvmlDeviceGetClockInfo(SM) returned {}", rc);
    return "";
  }
  bool sample(bench::ClockSample& s) {
    unsigned mhz = 0, mw = 0;
    unsigned long long bits = 0;
    if (clock(device, 1, &mhz) != 0 || reasons(device, &bits) != 0) return false;
    if (has_power && power(device, &mw) != 0) has_power = false;  // some boards do not report power
    s.sm_clock_mhz = mhz;
    s.power_w = has_power ? mw / 1000.0 : 0.0;
    s.reasons = bits;
    return true;
  }
};

ClockMonitor::ClockMonitor(int device, int period_ms) : nvml_(std::make_unique<Nvml>()), period_ms_(period_ms) {
  why_not_ = nvml_->open(device);
  if (why_not_.empty() && nvml_->driver) {
    char version[96] = {};
    if (nvml_->driver(version, sizeof version) == 0) driver_version_ = version;
  }
  if (!why_not_.empty()) {
    nvml_.reset();
    return;
  }
  running_ = true;
  thread_ = std::thread([this] {
    while (running_) {
      bench::ClockSample s;
      if (nvml_->sample(s)) {
        const std::lock_guard<std::mutex> lock(mutex_);
        samples_.push_back(s);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(period_ms_));
    }
  });
}

ClockMonitor::~ClockMonitor() { stop(); }

bench::ClockRecord ClockMonitor::stop() {
  running_ = false;
  if (thread_.joinable()) thread_.join();
  if (!why_not_.empty()) return bench::summarize_clock_samples({}, why_not_);
  const std::lock_guard<std::mutex> lock(mutex_);
  return bench::summarize_clock_samples(samples_, fmt::format("NVML, every {} ms", period_ms_));
}

}  // namespace nibble::engine
