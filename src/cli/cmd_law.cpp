// `nibble law`: the precision-aware scaling law (docs/spec.md §7). fit a law to training runs, predict
// a loss, plan the compute-optimal forward:backward precision, and map the winner over (N, D/N).
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>

#include "command_registry.hpp"
#include "usage.hpp"
#include "nibble/workload/model_cli.hpp"
#include "nibble/report.hpp"
#include "nibble/law.hpp"

namespace nibble::cli {
namespace {

using namespace nibble::law;
using nibble::workload::non_negative_number;
using nibble::workload::positive_number;

// Options shared by predict / plan / map: which law, which FP4 efficiencies, which speedups.
struct LawInputs {
  std::string fit_path, fp4_scheme, speedups_path, fp8_recipe, fp4_recipe = "quartet", bench_mode;
  std::optional<double> eff_n, eff_d, sp_fwd, sp_bwd;
};

void add_law_options(CLI::App* app, LawInputs& in) {
  app->add_option("--fit", in.fit_path, "fit JSON from `nibble law fit --json` (default: published constants)");
  app->add_option("--eff-n", in.eff_n, "FP4 forward parameter efficiency (overrides the fit/published 0.65)");
  app->add_option("--eff-d", in.eff_d, "FP4 backward data efficiency (overrides the fit/published 0.95)");
}

void add_speedup_options(CLI::App* app, LawInputs& in) {
  app->add_option("--fp4-scheme", in.fp4_scheme, "scheme of the fit whose efficiencies FP4 uses (default quartet)");
  auto* file = app->add_option("--speedups", in.speedups_path, "`nibble bench --json` result to read speedups from");
  app->add_option("--fp8-recipe", in.fp8_recipe, "FP8 baseline recipe in the bench JSON (default fp8-current, "
                                                 "else fp8-delayed)")
      ->check(recipe_check());
  app->add_option("--fp4-recipe", in.fp4_recipe, "FP4 recipe in the bench JSON")
      ->check(recipe_check())
      ->capture_default_str();
  app->add_option("--bench-mode", in.bench_mode, "bench mode to read (default step, else per-gemm, else "
                                                 "pre-quantized)");
  app->add_option("--sp-fwd", in.sp_fwd, "FP4 forward speedup over FP8, by hand")->excludes(file);
  app->add_option("--sp-bwd", in.sp_bwd, "FP4 backward speedup over FP8, by hand")->excludes(file);
}

LawConstants resolve_law(const LawInputs& in, std::optional<FitResult>& fit) {
  if (in.fit_path.empty()) return published_constants();
  fit = load_fit(in.fit_path);
  return fit->law;
}

std::pair<Efficiency, std::string> resolve_fp4_eff(const LawInputs& in, const std::optional<FitResult>& fit) {
  Efficiency e = published_quartet_efficiency();
  std::string source = "published Quartet (MXFP4) efficiencies";
  if (fit) {
    std::string name = in.fp4_scheme;
    if (name.empty()) {
      std::vector<std::string> others;
      for (const auto& [n, _] : fit->schemes)
        if (n != fit->base_scheme) others.push_back(n);
      if (fit->schemes.count("quartet")) name = "quartet";
      else if (others.size() == 1) name = others[0];
      else if (!(in.eff_n && in.eff_d))
        throw UsageError(fmt::format(
            "the fit holds {} non-base schemes ({}): pick the FP4 one with --fp4-scheme, or give --eff-n and --eff-d",
            others.size(), fmt::join(others, ", ")));
    }
    if (!name.empty()) {
      e = scheme_efficiency(*fit, name);
      source = fmt::format("fitted scheme '{}'", name);
    }
  } else if (!in.fp4_scheme.empty()) {
    throw UsageError("--fp4-scheme needs --fit (the published constants only know Quartet)");
  }
  if (in.eff_n) e.eff_n = *in.eff_n, source += fmt::format("; eff_n {} given by hand", *in.eff_n);
  if (in.eff_d) e.eff_d = *in.eff_d, source += fmt::format("; eff_d {} given by hand", *in.eff_d);
  if (in.eff_n && in.eff_d) source = "given by hand (--eff-n, --eff-d)";
  return {e, source};
}

Speedups resolve_speedups(const LawInputs& in) {
  if (!in.speedups_path.empty()) {
    BenchSpeedupOptions o;
    o.fp8_recipe = in.fp8_recipe;
    o.fp4_recipe = in.fp4_recipe;
    o.mode = in.bench_mode;
    return read_bench_speedups(in.speedups_path, o).speedups;
  }
  Speedups sp;
  if (in.sp_fwd || in.sp_bwd) {
    if (!(in.sp_fwd && in.sp_bwd)) throw UsageError("give both --sp-fwd and --sp-bwd (or --speedups FILE)");
    sp = {*in.sp_fwd, *in.sp_bwd, fmt::format("given by hand (--sp-fwd {}, --sp-bwd {})", *in.sp_fwd, *in.sp_bwd)};
  }
  validate(sp);
  return sp;
}

void add_format_option(CLI::App* app, std::string& format) {
  app->add_option("--format", format, "output format")->check(CLI::IsMember({"table", "json"}))->capture_default_str();
}

// Written to a temporary name and renamed, so a failed run never leaves a file that looks complete.
void write_text(const std::string& path, const std::string& text) { nibble::report::write_file_atomic(path, text); }

std::string interval_text(const FitResult& fit, const std::string& name) {
  if (!fit.has_intervals) return "(no bootstrap)";
  const Interval i = fit.intervals.at(name);
  return fmt::format("[{:.4g}, {:.4g}]", i.lo, i.hi);
}

void print_fit_table(const FitResult& fit) {
  fmt::print("{}", nibble::report::wrap_text(fmt::format("Scaling-law fit ({}), solver: {}", fit.law.source, fit.solver),
                                            "", "  "));
  if (fit.base_held)
    fmt::print("  base constants held, only the schemes' efficiencies fitted; {} bootstrap resamples; Huber delta "
               "{:g} on log loss\n", fit.bootstrap_samples, fit.huber_delta);
  else
    fmt::print("  {} of {} initialisations converged; {} bootstrap resamples; Huber delta {:g} on log loss\n",
               fit.converged_starts, fit.starts, fit.bootstrap_samples, fit.huber_delta);
  const std::string level = fmt::format("{:g}% interval", 100 * fit.confidence);
  fmt::print("\n  {:<6} {:>12}  {}\n", "const", "value", level);
  const std::pair<const char*, double> c[] = {{"A", fit.law.A}, {"alpha", fit.law.alpha}, {"B", fit.law.B},
                                              {"beta", fit.law.beta}, {"E", fit.law.E}, {"gamma", fit.law.gamma}};
  for (const auto& [name, v] : c) fmt::print("  {:<6} {:>12.5g}  {}\n", name, v, interval_text(fit, name));
  fmt::print("\n  {:<14} {:>5} {:>8} {:>20} {:>8} {:>20}\n", "scheme", "runs", "eff_n", level, "eff_d", level);
  for (const auto& [name, s] : fit.schemes)
    fmt::print("  {:<14} {:>5} {:>8.4f} {:>20} {:>8.4f} {:>20}\n", name, s.runs, s.eff.eff_n,
               fmt::format("[{:.3f}, {:.3f}]", s.eff_n_interval.lo, s.eff_n_interval.hi), s.eff.eff_d,
               fmt::format("[{:.3f}, {:.3f}]", s.eff_d_interval.lo, s.eff_d_interval.hi));
  fmt::print("\n  residuals (log predicted - log observed), rms {:.2e}:\n", fit.rms_log_residual);
  fmt::print("  {:<14} {:>10} {:>10} {:>9} {:>9} {:>10}\n", "scheme", "n", "d", "loss", "pred", "log resid");
  for (const auto& r : fit.residuals)
    fmt::print("  {:<14} {:>10.3g} {:>10.3g} {:>9.4f} {:>9.4f} {:>10.2e}\n", r.run.scheme, r.run.n, r.run.d,
               r.run.loss, r.predicted, r.log_residual);
  if (!fit.poorly_determined.empty())
    fmt::print("\n{}", nibble::report::wrap_text(
                           fmt::format("Poorly determined ({} wider than half the value): {}. The base constants "
                                       "trade off against each other, so individual values can be loose while "
                                       "predictions stay tight; add runs over a wider range of N and D to pin them "
                                       "down.",
                                       level, fmt::join(fit.poorly_determined, ", ")),
                           "  ", "  "));
}

std::function<int()> setup_fit(CLI::App* app) {
  struct Args { std::string runs, base = "bf16", hold_base, json, solver = "auto", format = "table"; int starts = 64, boot = 100; std::uint64_t seed = 20250; double confidence = 0.95; };
  auto a = std::make_shared<Args>();
  app->add_option("runs", a->runs, "CSV with columns scheme,n,d,loss (other columns kept as metadata)")->required();
  app->add_option("--base-scheme", a->base, "full-precision scheme the base constants are fitted on")->capture_default_str();
  app->add_option("--hold-base", a->hold_base,
                  "hold the base constants (A, alpha, B, beta, E, gamma) of this fit JSON, e.g. "
                  "data/law/published_quartet_fit.json, and fit only the schemes' efficiencies");
  app->add_option("--json", a->json, "write the fit (A, alpha, B, beta, E, gamma, schemes, residuals) here");
  app->add_option("--starts", a->starts, "random initialisations")->check(CLI::Range(1, 100000))->capture_default_str();
  app->add_option("--bootstrap", a->boot, "bootstrap resamples for the intervals (0: none)")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  app->add_option("--seed", a->seed, "seed of initialisations and resampling")
      ->check(non_negative_number())
      ->capture_default_str();
  app->add_option("--confidence", a->confidence, "level of the bootstrap intervals, e.g. 0.9 for 90%")
      ->check(CLI::Range(0.5, 0.999))
      ->capture_default_str();
  app->add_option("--solver", a->solver, "auto | ceres | eigen-lm")
      ->check(CLI::IsMember({"auto", "ceres", "eigen-lm"}))
      ->capture_default_str();
  add_format_option(app, a->format);
  return [a] {
    FitOptions o;
    o.base_scheme = a->base;
    o.n_starts = a->starts;
    o.bootstrap = a->boot;
    o.seed = a->seed;
    o.confidence = a->confidence;
    if (a->solver == "ceres") o.solver = FitSolver::ceres;
    else if (a->solver == "eigen-lm") o.solver = FitSolver::eigen_lm;
    if (!a->hold_base.empty()) o.held_base = load_fit(a->hold_base).law;
    nibble::report::check_output_paths({a->json});  // fail on an unwritable path before the long fit
    FitResult fit = fit_scaling_law(read_runs_csv(a->runs), o);
    fit.law.source += " from " + a->runs;
    const nlohmann::json j = fit_to_json(fit);
    if (!a->json.empty()) write_text(a->json, j.dump(2) + "\n");
    if (a->format == "json") fmt::print("{}\n", j.dump(2));
    else print_fit_table(fit);
    std::fflush(stdout);
    nibble::report::say_written({a->json});
    return 0;
  };
}

std::function<int()> setup_predict(CLI::App* app) {
  struct Args { double n = 0, d = 0; LawInputs in; std::string scheme, format = "table"; };
  auto a = std::make_shared<Args>();
  app->add_option("--n", a->n, "non-embedding parameters")->required()->check(positive_number());
  app->add_option("--d", a->d, "training tokens")->required()->check(positive_number());
  add_law_options(app, a->in);
  app->add_option("--scheme", a->scheme, "scheme of the fit (or bf16/fp8 = eff 1, quartet/fp4 = published)");
  add_format_option(app, a->format);
  return [a] {
    std::optional<FitResult> fit;
    const LawConstants law = resolve_law(a->in, fit);
    Efficiency e;
    std::string source = "baseline precision (eff 1)";
    if (!a->scheme.empty()) {
      if (fit) e = scheme_efficiency(*fit, a->scheme), source = fmt::format("fitted scheme '{}'", a->scheme);
      else if (a->scheme == "quartet" || a->scheme == "fp4") e = published_quartet_efficiency(), source = "published Quartet efficiencies";
      else if (a->scheme != "bf16" && a->scheme != "fp8")
        throw UsageError(fmt::format("--scheme '{}' is unknown without --fit: use bf16, fp8, quartet or fp4, "
                                                "or give --eff-n/--eff-d", a->scheme));
    }
    if (a->in.eff_n) e.eff_n = *a->in.eff_n, source = "given by hand";
    if (a->in.eff_d) e.eff_d = *a->in.eff_d, source = "given by hand";
    const double loss = predict_loss(law, a->n, a->d, e);
    if (a->format == "json") {
      const nlohmann::json j{{"loss", loss}, {"n", a->n}, {"d", a->d}, {"eff_n", e.eff_n}, {"eff_d", e.eff_d},
                             {"efficiency_source", source}, {"scheme", a->scheme},
                             {"law", {{"A", law.A}, {"alpha", law.alpha}, {"B", law.B}, {"beta", law.beta},
                                      {"E", law.E}, {"gamma", law.gamma}, {"source", law.source}}}};
      fmt::print("{}\n", j.dump(2));
    } else {
      fmt::print("{}{}",
                 nibble::report::wrap_text(fmt::format("predicted loss {:.4f} for N = {:.4g}, D = {:.4g} ({:.0f} "
                                                       "tokens/param), eff_n {:.3f}, eff_d {:.3f} ({})",
                                                       loss, a->n, a->d, a->d / a->n, e.eff_n, e.eff_d, source),
                                           "", "  "),
                 nibble::report::wrap_text("law: " + law.source, "", "  "));
    }
    return 0;
  };
}

std::string threshold_text(const Fp4Threshold& t) {
  switch (t.kind) {
    case Fp4Threshold::wins_above: return fmt::format("FP4:FP4 beats FP8:FP8 above {:.3g} tokens/param", t.tokens_per_param);
    case Fp4Threshold::wins_below: return fmt::format("FP4:FP4 beats FP8:FP8 below {:.3g} tokens/param", t.tokens_per_param);
    case Fp4Threshold::always: return "FP4:FP4 beats FP8:FP8 at every D/N";
    default: return "FP4:FP4 never beats FP8:FP8 at this N";
  }
}

std::function<int()> setup_plan(CLI::App* app) {
  struct Args { double n = 0, d = 0; LawInputs in; std::string format = "table"; };
  auto a = std::make_shared<Args>();
  app->add_option("--n", a->n, "non-embedding parameters (inference budget)")->required()->check(positive_number());
  app->add_option("--d", a->d, "training tokens (training budget N D)")->required()->check(positive_number());
  add_law_options(app, a->in);
  add_speedup_options(app, a->in);
  add_format_option(app, a->format);
  return [a] {
    std::optional<FitResult> fit;
    const LawConstants law = resolve_law(a->in, fit);
    const auto [eff, eff_source] = resolve_fp4_eff(a->in, fit);
    const Speedups sp = resolve_speedups(a->in);
    Plan plan = plan_precision(law, eff, sp, a->n, a->d);
    plan.fp4_eff_source = eff_source;
    const Fp4Threshold t = fp4_fp4_threshold(law, eff, sp, a->n);
    if (a->format == "json") {
      nlohmann::json j = plan_to_json(plan);
      j["fp4_fp4_threshold"] = {{"text", threshold_text(t)}, {"tokens_per_param", t.tokens_per_param}};
      fmt::print("{}\n", j.dump(2));
      return 0;
    }
    fmt::print("{:<9} {:>7} {:>7} {:>7} {:>11} {:>11} {:>6} {:>6} {:>9}\n", "fwd:bwd", "sp_fw", "sp_bw", "sp_tr",
               "N eff", "D eff", "eff_n", "eff_d", "loss");
    for (int i = 0; i < 4; ++i) {
      const auto& s = plan.schemes[i];
      fmt::print("{:<9} {:>7.3f} {:>7.3f} {:>7.3f} {:>11.4g} {:>11.4g} {:>6.3f} {:>6.3f} {:>9.4f}{}\n", s.name, s.sp_fw,
                 s.sp_bw, s.sp_tr, s.n_effective, s.d_effective, s.eff.eff_n, s.eff.eff_d, s.loss,
                 i == plan.best ? "  <- best" : "");
    }
    fmt::print("\n{}\n{}", nibble::report::wrap_text(explain_plan(plan)),
               nibble::report::wrap_text(fmt::format("At N = {:.3g}: {}.", a->n, threshold_text(t))));
    return 0;
  };
}

std::function<int()> setup_map(CLI::App* app) {
  struct Args { LawInputs in; std::string svg, csv; MapGridSpec grid; };
  auto a = std::make_shared<Args>();
  add_law_options(app, a->in);
  add_speedup_options(app, a->in);
  app->add_option("--svg", a->svg, "write the map as a self-contained SVG");
  app->add_option("--csv", a->csv, "write every cell's losses and winner as CSV");
  app->add_option("--n-min", a->grid.n_min, "smallest N")->check(positive_number())->capture_default_str();
  app->add_option("--n-max", a->grid.n_max, "largest N")->check(positive_number())->capture_default_str();
  app->add_option("--ratio-min", a->grid.ratio_min, "smallest D/N")->check(positive_number())->capture_default_str();
  app->add_option("--ratio-max", a->grid.ratio_max, "largest D/N")->check(positive_number())->capture_default_str();
  app->add_option("--steps", a->grid.n_steps, "cells per axis")->check(CLI::Range(2, 1000))->capture_default_str();
  return [a] {
    if (a->svg.empty() && a->csv.empty()) throw UsageError("nothing to write: give --svg OUT.svg and/or --csv OUT.csv");
    nibble::report::check_output_paths({a->svg, a->csv});  // both writable before either is written
    a->grid.ratio_steps = a->grid.n_steps;
    std::optional<FitResult> fit;
    const LawConstants law = resolve_law(a->in, fit);
    const auto [eff, eff_source] = resolve_fp4_eff(a->in, fit);
    const Speedups sp = resolve_speedups(a->in);
    const OptimalityMap m = compute_optimality_map(law, eff, eff_source, sp, a->grid);
    if (!a->svg.empty()) write_text(a->svg, optimality_map_svg(m));
    if (!a->csv.empty()) write_text(a->csv, optimality_map_csv(m));
    std::array<int, 4> wins{};
    for (const auto& c : m.cells) ++wins[c.best];
    std::string counts;
    for (int i = 0; i < 4; ++i) counts += fmt::format("{}{} {}", i ? ", " : "", kSchemeNames[i], wins[i]);
    fmt::print("{}{}{}{}",
               nibble::report::wrap_text(fmt::format("optimality map over N [{:.3g}, {:.3g}] x D/N [{:.3g}, {:.3g}], {} "
                                                     "cells: {}",
                                                     a->grid.n_min, a->grid.n_max, a->grid.ratio_min,
                                                     a->grid.ratio_max, m.cells.size(), counts),
                                         "", "  "),
               nibble::report::wrap_text("law: " + law.source, "", "  "),
               nibble::report::wrap_text(fmt::format("FP4 efficiencies: eff_n {:.3f}, eff_d {:.3f} ({})", eff.eff_n,
                                                     eff.eff_d, eff_source),
                                         "", "  "),
               nibble::report::wrap_text("speedups: " + sp.source, "", "  "));
    std::fflush(stdout);
    nibble::report::say_written({a->svg, a->csv});
    return 0;
  };
}

std::function<int()> setup_reach(CLI::App* app) {
  struct Args { double n = 0, loss = 0; std::string fit_path, speedups_path, bench_mode, format = "table"; };
  auto a = std::make_shared<Args>();
  app->add_option("--n", a->n, "non-embedding parameters of the model")->required()->check(positive_number());
  app->add_option("--loss", a->loss, "target validation loss")->required()->check(positive_number());
  app->add_option("--fit", a->fit_path, "fit JSON from `nibble law fit --json` (its schemes and their intervals)")
      ->required();
  app->add_option("--speedups", a->speedups_path, "`nibble bench --json` result (measured or predicted) giving "
                                                  "each recipe's speedup over bf16")->required();
  app->add_option("--bench-mode", a->bench_mode, "bench mode to read (default step, else pre-quantized)");
  add_format_option(app, a->format);
  return [a] {
    const FitResult fit = load_fit(a->fit_path);
    const ReachPlan plan = reach_plan(fit, read_recipe_speedups(a->speedups_path, a->bench_mode), a->n, a->loss);
    if (a->format == "json") {
      fmt::print("{}\n", reach_to_json(plan).dump(2));
      return 0;
    }
    fmt::print("{}", nibble::report::wrap_text(fmt::format("time to reach loss {} at N = {:.4g}, relative to {} (tokens "
                                                          "needed / step speedup)",
                                                          plan.loss, plan.n, plan.base_scheme),
                                              "", "  "));
    size_t ws = 6, wr = 6;
    for (const auto& r : plan.rows) ws = std::max(ws, r.scheme.size()), wr = std::max(wr, r.recipe.size());
    const auto iv = [](double v, const Interval& i) {
      return i.hi > 0 ? fmt::format("{:.2f} [{:.2f}, {:.2f}]", v, i.lo, i.hi) : fmt::format("{:.2f}", v);
    };
    fmt::print("{:<{}} {:<{}} {:>17} {:>17} {:>8} {:>9} {:>20}\n", "scheme", ws, "recipe", wr, "eff_n", "eff_d",
               "speedup", "tokens", "time vs base");
    for (const auto& r : plan.rows)
      fmt::print("{:<{}} {:<{}} {:>17} {:>17} {:>7.2f}x {:>9.3g} {:>20}\n", r.scheme, ws, r.recipe, wr,
                 iv(r.fit.eff.eff_n, r.fit.eff_n_interval), iv(r.fit.eff.eff_d, r.fit.eff_d_interval), r.speedup,
                 r.tokens, r.reachable ? fmt::format("{:.3f} [{:.3f}, {:.3f}]", r.time, r.time_lo, r.time_hi)
                                       : std::string("unreachable"));
    if (!plan.rows.empty() && plan.rows.front().reachable) {
      const auto& b = plan.rows.front();
      fmt::print("\nsoonest: {} ({:.0f}% of {}'s time; interval {:.0f}%-{:.0f}%)\n", b.scheme, 100 * b.time,
                 plan.base_scheme, 100 * b.time_lo, 100 * b.time_hi);
    }
    for (const auto& s : plan.skipped) fmt::print("{}", nibble::report::wrap_text("not ranked: " + s, "", "  "));
    fmt::print("{}{}", nibble::report::wrap_text("law: " + plan.law_source, "", "  "),
               nibble::report::wrap_text("speedups: " + plan.speedup_source, "", "  "));
    if (fit.has_intervals)
      fmt::print("intervals: the fit's {:g}% bootstrap intervals of eff_n and eff_d, and the times they give\n",
                 100 * fit.confidence);
    return 0;
  };
}

const bool registered = register_command({
    "law",
    "precision-aware scaling law: fit runs, predict loss, plan FP8/FP4 forward:backward, map the optimum, time to "
    "reach a loss per recipe",
    [](CLI::App& sub) -> std::function<int()> {
      sub.require_subcommand(1);
      auto fit = setup_fit(sub.add_subcommand("fit", "fit the law to training runs (CSV: scheme,n,d,loss)"));
      auto predict = setup_predict(sub.add_subcommand("predict", "predicted loss for N parameters and D tokens"));
      auto plan = setup_plan(sub.add_subcommand("plan", "compute-optimal forward:backward precision for N, D"));
      auto map = setup_map(sub.add_subcommand("map", "optimality map over N and D/N as SVG and CSV"));
      auto reach = setup_reach(sub.add_subcommand("reach", "which recipe reaches a target loss soonest at N"));
      CLI::App* s = &sub;
      return [s, fit, predict, plan, map, reach]() -> int {
        if (s->got_subcommand("fit")) return fit();
        if (s->got_subcommand("predict")) return predict();
        if (s->got_subcommand("plan")) return plan();
        if (s->got_subcommand("reach")) return reach();
        return map();
      };
    }});

}  // namespace
}  // namespace nibble::cli
