// Back-end selection for solve_huber, and the Ceres back end when the build has Ceres.
#include <stdexcept>

#include "huber_solver.hpp"

#ifdef NIBBLE_LAW_HAVE_CERES
#include <ceres/ceres.h>
#endif

namespace nibble::law::detail {

HuberSolution solve_huber_eigen_lm(const HuberProblem& p, std::vector<double> x0);

bool backend_available(Backend b) {
#ifdef NIBBLE_LAW_HAVE_CERES
  if (b == Backend::ceres) return true;
#endif
#ifdef NIBBLE_LAW_HAVE_EIGEN
  if (b == Backend::eigen_lm) return true;
#endif
  return false;
}

std::string backend_name(Backend b) {
  if (b == Backend::ceres) return "ceres (Levenberg-Marquardt, Huber loss)";
  return backend_available(Backend::ceres)
             ? "eigen-lm (asked for; Levenberg-Marquardt with reweighted Huber residuals)"
             : "eigen-lm fallback (this build lacks Ceres; Levenberg-Marquardt with reweighted Huber residuals)";
}

Backend default_backend() {
  if (backend_available(Backend::ceres)) return Backend::ceres;
  if (backend_available(Backend::eigen_lm)) return Backend::eigen_lm;
  throw std::runtime_error("this build lacks both Ceres and Eigen, so `nibble law fit` cannot run; "
                           "install libceres-dev (or libeigen3-dev) and rebuild");
}

#ifdef NIBBLE_LAW_HAVE_CERES
namespace {
// One residual of the problem as a Ceres cost; central differences, as the law is cheap to evaluate.
struct OneResidual {
  const HuberProblem* problem;
  int index;
  bool operator()(double const* const* params, double* residual) const {
    residual[0] = problem->residual(params[0], index);
    return std::isfinite(residual[0]);
  }
};
}  // namespace

static HuberSolution solve_huber_ceres(const HuberProblem& p, std::vector<double> x0) {
  std::vector<double> x = std::move(x0);
  for (int j = 0; j < p.n_params; ++j) x[j] = std::min(std::max(x[j], p.lower[j]), p.upper[j]);
  ceres::Problem problem;
  for (int i = 0; i < p.n_residuals; ++i) {
    auto* cost = new ceres::DynamicNumericDiffCostFunction<OneResidual, ceres::CENTRAL>(
        new OneResidual{&p, i});
    cost->AddParameterBlock(p.n_params);
    cost->SetNumResiduals(1);
    problem.AddResidualBlock(cost, new ceres::HuberLoss(p.huber_delta), x.data());
  }
  for (int j = 0; j < p.n_params; ++j) {
    problem.SetParameterLowerBound(x.data(), j, p.lower[j]);
    problem.SetParameterUpperBound(x.data(), j, p.upper[j]);
  }
  ceres::Solver::Options options;
  options.linear_solver_type = ceres::DENSE_QR;
  options.max_num_iterations = p.max_iterations;
  options.function_tolerance = 1e-12;
  options.gradient_tolerance = 1e-14;
  options.parameter_tolerance = 1e-12;
  options.logging_type = ceres::SILENT;
  options.minimizer_progress_to_stdout = false;
  ceres::Solver::Summary summary;
  ceres::Solve(options, &problem, &summary);
  HuberSolution s;
  s.x = x;
  // Ceres reports 1/2 sum rho; keep the convention of huber_rho (no 1/2).
  s.cost = 2 * summary.final_cost;
  s.converged = summary.termination_type == ceres::CONVERGENCE;
  s.iterations = static_cast<int>(summary.iterations.size());
  s.message = summary.message;
  return s;
}
#endif

HuberSolution solve_huber(const HuberProblem& p, std::vector<double> x0, Backend b) {
  if (static_cast<int>(x0.size()) != p.n_params || static_cast<int>(p.lower.size()) != p.n_params ||
      static_cast<int>(p.upper.size()) != p.n_params)
    throw std::logic_error("solve_huber: x0 and bounds must have n_params entries");
  if (!backend_available(b))
    throw std::runtime_error(b == Backend::ceres
                                 ? "this build lacks Ceres: rebuild with libceres-dev, or use the eigen-lm fallback"
                                 : "this build lacks Eigen: the eigen-lm fallback is unavailable");
#ifdef NIBBLE_LAW_HAVE_CERES
  if (b == Backend::ceres) return solve_huber_ceres(p, std::move(x0));
#endif
  return solve_huber_eigen_lm(p, std::move(x0));
}

}  // namespace nibble::law::detail
