#include <algorithm>
#include <cmath>
#include <vector>

#include "cuda_stream_event.hpp"
#include "device_buffer.hpp"
#include "nibble/kernels/check.hpp"
#include "nibble/engine/timing.hpp"

namespace nibble::engine {
using recipes::DeviceBuffer;
namespace {

// A scratch buffer written between repetitions evicts the operands of the previous one from L2.
struct L2Flusher {
  DeviceBuffer buf;
  explicit L2Flusher(size_t l2) : buf(2 * l2, "the L2 flush buffer") {}
  void flush(cudaStream_t s) const { NIBBLE_CUDA_CHECK(cudaMemsetAsync(buf.get(), 0x5a, buf.bytes(), s)); }
};

constexpr int kMaxWarmupRuns = 100000;  // bounds the time-based warm-up of a very short work item

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const double pos = p * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

__global__ void spin_kernel(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

}  // namespace

TimingStats time_on_gpu(const std::function<void(cudaStream_t, int)>& work, const TimingOptions& opt,
                        cudaStream_t stream) {
  int device = 0, l2 = 0;
  NIBBLE_CUDA_CHECK(cudaGetDevice(&device));
  NIBBLE_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
  L2Flusher flusher(static_cast<size_t>(l2));
  int rep = 0;
  for (; rep < opt.warmup; ++rep) work(stream, rep);
  if (opt.warmup_ms > 0) {
    // Timed batches: the first of one run, each next one sized from the time per run measured so
    // far to fill what is left of warmup_ms (at most 256 runs, so the GPU is never queued far ahead).
    const Event a, b;
    double elapsed = 0;
    int batch = 1;
    while (elapsed < opt.warmup_ms && rep < kMaxWarmupRuns) {
      NIBBLE_CUDA_CHECK(cudaEventRecord(a.get(), stream));
      for (int i = 0; i < batch && rep < kMaxWarmupRuns; ++i) work(stream, rep++);
      NIBBLE_CUDA_CHECK(cudaEventRecord(b.get(), stream));
      NIBBLE_CUDA_CHECK(cudaEventSynchronize(b.get()));
      float t = 0;
      NIBBLE_CUDA_CHECK(cudaEventElapsedTime(&t, a.get(), b.get()));
      elapsed += t;
      const int runs = rep - opt.warmup;  // time-based runs so far (>= 1)
      const double per_run = elapsed > 0 ? elapsed / runs : opt.warmup_ms;
      batch = static_cast<int>(std::clamp(std::ceil((opt.warmup_ms - elapsed) / per_run), 1.0, 256.0));
    }
  }
  const int n = std::max(1, opt.iters);
  const std::vector<Event> start(n), stop(n);
  for (int i = 0; i < n; ++i) {
    if (opt.flush_l2) flusher.flush(stream);
    NIBBLE_CUDA_CHECK(cudaEventRecord(start[i].get(), stream));
    work(stream, rep + i);
    NIBBLE_CUDA_CHECK(cudaEventRecord(stop[i].get(), stream));
  }
  NIBBLE_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<double> ms(n);
  for (int i = 0; i < n; ++i) {
    float t = 0;
    NIBBLE_CUDA_CHECK(cudaEventElapsedTime(&t, start[i].get(), stop[i].get()));
    ms[i] = t;
  }
  TimingStats s;
  s.runs = n;
  s.median_ms = percentile(ms, 0.5);
  s.p10_ms = percentile(ms, 0.1);
  s.p90_ms = percentile(ms, 0.9);
  s.min_ms = *std::min_element(ms.begin(), ms.end());
  s.max_ms = *std::max_element(ms.begin(), ms.end());
  return s;
}

bool query_gpu(GpuInfo& info) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();  // clear the sticky "no device" error
    return false;
  }
  int dev = 0;
  NIBBLE_CUDA_CHECK(cudaGetDevice(&dev));
  cudaDeviceProp p{};
  NIBBLE_CUDA_CHECK(cudaGetDeviceProperties(&p, dev));
  info.name = p.name;
  info.sm_count = p.multiProcessorCount;
  info.cc_major = p.major;
  info.cc_minor = p.minor;
  info.l2_bytes = static_cast<size_t>(p.l2CacheSize);
  info.total_memory = p.totalGlobalMem;
  int clk = 0, mclk = 0;
  NIBBLE_CUDA_CHECK(cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, dev));
  NIBBLE_CUDA_CHECK(cudaDeviceGetAttribute(&mclk, cudaDevAttrMemoryClockRate, dev));
  NIBBLE_CUDA_CHECK(cudaDeviceGetAttribute(&info.memory_bus_bits, cudaDevAttrGlobalMemoryBusWidth, dev));
  info.sm_clock_mhz = clk / 1000;
  info.memory_clock_mhz = mclk / 1000;
  NIBBLE_CUDA_CHECK(cudaDriverGetVersion(&info.driver_version));
  NIBBLE_CUDA_CHECK(cudaRuntimeGetVersion(&info.runtime_version));
  info.cublaslt_version = cublasLtGetVersion();
  return true;
}

void warm_up_clocks(double ms, cudaStream_t stream) {
  int dev = 0, clk_khz = 0, sms = 0;
  NIBBLE_CUDA_CHECK(cudaGetDevice(&dev));
  NIBBLE_CUDA_CHECK(cudaDeviceGetAttribute(&clk_khz, cudaDevAttrClockRate, dev));
  NIBBLE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const long long cycles = static_cast<long long>(ms * clk_khz);
  spin_kernel<<<sms * 4, 128, 0, stream>>>(cycles);
  NIBBLE_CHECK_LAUNCH();
  NIBBLE_CUDA_CHECK(cudaStreamSynchronize(stream));
}

double measure_copy_bandwidth(size_t bytes, const TimingOptions& opt, cudaStream_t stream) {
  const DeviceBuffer src(bytes, "the copy bandwidth's source"), dst(bytes, "the copy bandwidth's destination");
  NIBBLE_CUDA_CHECK(cudaMemsetAsync(src.get(), 0x3c, bytes, stream));
  const TimingStats t = time_on_gpu(
      [&](cudaStream_t s, int) {
        NIBBLE_CUDA_CHECK(cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, s));
      },
      opt, stream);
  return 2.0 * static_cast<double>(bytes) / (t.median_ms * 1e-3);
}

}  // namespace nibble::engine
