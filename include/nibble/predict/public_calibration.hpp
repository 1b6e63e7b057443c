// Blackwell predictions from public measurements (data/calibration/blackwell-public.json): GEMM efficiencies
// per tensor-core family, and the interval around every time they predict, derived from how far the
// efficiencies carry from one public measurement to the next. The method is in docs/predict.md.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "nibble/predict.hpp"

namespace nibble::predict {

// One public measurement: a whole training step's model TFLOP/s per GPU (or tokens/s), as published.
struct PublicPoint {
  std::string source;        // id of a PublicSource
  std::string gpu;           // as the source names it ("DGX-GB200")
  std::string database_gpu;  // the data/gpus.json entry whose peaks it is divided by
  bool peaks_proxy = false;  // database_gpu is a stand-in (another part's peaks)
  std::string recipe;        // nibble's recipe of the same scaling
  std::string model;
  std::string setup;
  double model_tflops = 0;   // 0 when the source gives only tokens/s
  double tokens_per_s = 0;
};
struct PublicSource {
  std::string id, title, url, where;
};
struct PublicData {
  std::vector<PublicSource> sources;
  std::vector<PublicPoint> points;
};

inline constexpr const char* kBlackwellPublicFile = "blackwell-public.json";
// data/calibration/blackwell-public.json; errors name the file and the field.
PublicData load_public_data();
PublicData load_public_data(const std::string& path);

// Efficiencies fitted on the public points:
//   utilisation u = model TFLOP/s / the recipe's dense peak on the point's database GPU;
//   transfer = nibble's measured fp8-tensor GEMM efficiency on the H100 / the geometric mean u of the H100 FP8
//              points (what a whole step loses to attention, communication and the rest, on a GPU nibble measured);
//   efficiency of a Blackwell family = transfer x the geometric mean u of its Blackwell points.
// Interval: every Blackwell point left out in turn, its u predicted from the others of its family; the
// factors actual time / predicted time (= predicted u / actual u), their extremes = [low, high] (low <= 1 <= high).
struct PublicFit {
  double transfer = 0;
  std::map<std::string, double> efficiency;       // by family: fp8-tensor, mx-native, fp4-native
  std::map<std::string, int> points_per_family;
  double low = 1, high = 1;                       // interval factors on a predicted time
  int left_out_points = 0;                        // points the interval is built from
  std::vector<std::string> notes;
};
// `exclude_source`: fit without that source's points (the held-back check). Throws std::invalid_argument when
// no H100 FP8 point or no Blackwell point with model TFLOP/s remains.
PublicFit fit_public(const PublicData& data, const std::vector<GpuSpec>& gpus, double h100_fp8_efficiency,
                     const std::string& exclude_source = "");

// The held-back check: for each source with model-TFLOP/s points, fit without it and predict each of its
// Blackwell points' model TFLOP/s; relative error = predicted / published - 1.
struct HeldBackError {
  std::string source, gpu, recipe, model;
  double published_tflops = 0, predicted_tflops = 0, relative_error = 0;
};
std::vector<HeldBackError> held_back_check(const PublicData& data, const std::vector<GpuSpec>& gpus,
                                           double h100_fp8_efficiency);

// The family a public recipe's GEMMs run on a Blackwell GPU (execution_for), for the fit's bookkeeping.
std::string blackwell_family(const std::string& recipe);

}  // namespace nibble::predict
