// The lines that open both terminal renderings (render_terminal, render_summary): what ran where.
#pragma once
#include <string>

#include "nibble/results/result.hpp"

namespace nibble::report {

// The PREDICTED banner that opens a predicted result (three lines, kTerminalColumns wide), empty when measured.
std::string opening_banner(const bench::BenchResult& r);
// "nibble bench on <gpu>, <SMs>, <clock>[, driver, CUDA, cuBLASLt]\n"
std::string gpu_line(const bench::BenchResult& r);
// "<model>: hidden ..., layers ...\nT = <tokens> tokens per micro-batch, <layers> layers\n"
std::string model_line(const bench::BenchResult& r);
// "copy bandwidth assumed|measured X TB/s (... of the peak)\n", empty without one.
std::string copy_bandwidth_line(const bench::BenchResult& r);

}  // namespace nibble::report
