// Compute-normalized comparison of forward:backward precisions; see planner.hpp.
#include "nibble/law/planner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace nibble::law {

void validate(const Speedups& sp) {
  if (!(std::isfinite(sp.fwd) && sp.fwd > 0))
    throw std::invalid_argument(fmt::format("forward speedup {} must be positive and finite (e.g. --sp-fwd 1.8)", sp.fwd));
  if (!(std::isfinite(sp.bwd) && sp.bwd > 0))
    throw std::invalid_argument(fmt::format("backward speedup {} must be positive and finite (e.g. --sp-bwd 1.6)", sp.bwd));
}

double training_speedup(double sp_fw, double sp_bw) { return 1.0 / (1.0 / (3 * sp_fw) + 2.0 / (3 * sp_bw)); }

Plan plan_precision(const LawConstants& law, Efficiency fp4_eff, const Speedups& sp, double n, double d) {
  validate(law);
  validate(sp);
  Plan plan;
  plan.n = n;
  plan.d = d;
  plan.law = law;
  plan.fp4_eff = fp4_eff;
  plan.speedups = sp;
  for (int i = 0; i < 4; ++i) {
    const bool fp4_fwd = i == 1 || i == 3, fp4_bwd = i == 2 || i == 3;
    SchemeOutcome& s = plan.schemes[i];
    s.name = kSchemeNames[i];
    s.sp_fw = fp4_fwd ? sp.fwd : 1.0;
    s.sp_bw = fp4_bwd ? sp.bwd : 1.0;
    s.sp_tr = training_speedup(s.sp_fw, s.sp_bw);
    s.n_effective = n * s.sp_fw;
    s.d_effective = d * s.sp_tr / s.sp_fw;
    s.eff = {fp4_fwd ? fp4_eff.eff_n : 1.0, fp4_bwd ? fp4_eff.eff_d : 1.0};
    s.loss = predict_loss(law, s.n_effective, s.d_effective, s.eff);
  }
  for (int i = 1; i < 4; ++i)
    if (plan.schemes[i].loss < plan.schemes[plan.best].loss) plan.best = i;
  double runner_up = INFINITY;
  for (int i = 0; i < 4; ++i)
    if (i != plan.best) runner_up = std::min(runner_up, plan.schemes[i].loss);
  plan.margin = runner_up - plan.schemes[plan.best].loss;
  return plan;
}

Fp4Threshold fp4_fp4_threshold(const LawConstants& law, Efficiency e, const Speedups& sp, double n) {
  validate(law);
  validate(sp);
  const double sp_tr = training_speedup(sp.fwd, sp.bwd);
  // reducible(fp4:fp4) - reducible(fp8:fp8) = a + b r^-beta with r = D/N.
  const double a = law.A * (std::pow(n * sp.fwd * e.eff_n, -law.alpha) - std::pow(n, -law.alpha));
  const double b = law.B * std::pow(n, -law.beta) * (std::pow(sp_tr / sp.fwd * e.eff_d, -law.beta) - 1.0);
  if (a < 0 && b > 0) return {Fp4Threshold::wins_above, std::pow(b / -a, 1.0 / law.beta)};
  if (a > 0 && b < 0) return {Fp4Threshold::wins_below, std::pow(-b / a, 1.0 / law.beta)};
  if (a <= 0 && b <= 0 && (a < 0 || b < 0)) return {Fp4Threshold::always, 0};
  return {Fp4Threshold::never, 0};
}

std::string explain_plan(const Plan& p) {
  const SchemeOutcome& best = p.schemes[p.best];
  const SchemeOutcome& base = p.schemes[0];
  std::string why;
  if (p.best == 0) {
    why = fmt::format(
        "No FP4 scheme pays here: its quality cost (eff_n {:.2f}, eff_d {:.2f}) outweighs what its speedup "
        "buys (forward {:.2f}x, backward {:.2f}x). ",
        p.fp4_eff.eff_n, p.fp4_eff.eff_d, p.speedups.fwd, p.speedups.bwd);
  } else {
    why = fmt::format(
        "{} trains a {:.3g}-parameter model on {:.3g} tokens for the compute FP8:FP8 spends on {:.3g} "
        "parameters and {:.3g} tokens; after its efficiency losses (effective N x{:.2f}, D x{:.2f}) that is "
        "worth more than the lost precision. ",
        best.name, best.n_effective, best.d_effective, p.n, p.d, best.n_effective * best.eff.eff_n / p.n,
        best.d_effective * best.eff.eff_d / p.d);
  }
  return fmt::format(
      "For N = {:.3g} non-embedding parameters and D = {:.3g} tokens ({:.0f} tokens/param), {} gives the "
      "lowest predicted loss, {:.4f}, {:.4f} below the runner-up{}. {}Loss law: {}; FP4 efficiencies: {}; "
      "speedups: {}. FP8 is the baseline precision (efficiency 1). Differences below ~0.01 in loss are "
      "within the fit's typical error: treat them as ties.",
      p.n, p.d, p.d / p.n, best.name, best.loss, p.margin,
      p.best == 0 || base.loss - best.loss <= p.margin * (1 + 1e-12) ? "" : fmt::format(" and {:.4f} below FP8:FP8", base.loss - best.loss), why, p.law.source,
      p.fp4_eff_source.empty() ? "given" : p.fp4_eff_source, p.speedups.source);
}

nlohmann::json plan_to_json(const Plan& p) {
  nlohmann::json j;
  j["n"] = p.n;
  j["d"] = p.d;
  j["best"] = p.schemes[p.best].name;
  j["margin"] = p.margin;
  j["law"] = {{"A", p.law.A}, {"alpha", p.law.alpha}, {"B", p.law.B},         {"beta", p.law.beta},
              {"E", p.law.E}, {"gamma", p.law.gamma}, {"source", p.law.source}};
  j["fp4_efficiency"] = {{"eff_n", p.fp4_eff.eff_n}, {"eff_d", p.fp4_eff.eff_d}, {"source", p.fp4_eff_source}};
  j["speedups"] = {{"fwd", p.speedups.fwd}, {"bwd", p.speedups.bwd}, {"source", p.speedups.source}};
  for (const auto& s : p.schemes)
    j["schemes"][s.name] = {{"loss", s.loss},          {"sp_fw", s.sp_fw},
                            {"sp_bw", s.sp_bw},        {"sp_tr", s.sp_tr},
                            {"n_effective", s.n_effective}, {"d_effective", s.d_effective},
                            {"eff_n", s.eff.eff_n},     {"eff_d", s.eff.eff_d}};
  j["explanation"] = explain_plan(p);
  return j;
}

}  // namespace nibble::law
