// solve_huber: back-end selection, the Ceres back end when the build has Ceres, and the Eigen
// Levenberg-Marquardt back end (the fallback when the build lacks Ceres).
#include <cmath>
#include <stdexcept>

#include "huber_solver.hpp"

#ifdef NIBBLE_LAW_HAVE_CERES
#include <ceres/ceres.h>
#endif
#ifdef NIBBLE_LAW_HAVE_EIGEN
#include <Eigen/Dense>
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

// Eigen Levenberg-Marquardt back end of solve_huber (the fallback when the build lacks Ceres).
// Huber is handled by iteratively reweighted least squares: each step solves the LM system with
// weights w_i = min(1, delta / |r_i|), which has the same stationary points as the Huber objective.
namespace nibble::law::detail {

double huber_rho(double r, double delta) {
  const double a = std::abs(r);
  return a <= delta ? r * r : 2 * delta * a - delta * delta;
}

#ifdef NIBBLE_LAW_HAVE_EIGEN
namespace {

using Vec = Eigen::VectorXd;

Vec all_residuals(const HuberProblem& p, const Vec& x) {
  Vec r(p.n_residuals);
  for (int i = 0; i < p.n_residuals; ++i) r[i] = p.residual(x.data(), i);
  return r;
}

double total_cost(const HuberProblem& p, const Vec& r) {
  double c = 0;
  for (int i = 0; i < r.size(); ++i) c += huber_rho(r[i], p.huber_delta);
  return c;
}

Vec clamp_to_box(const HuberProblem& p, Vec x) {
  for (int j = 0; j < p.n_params; ++j) x[j] = std::min(std::max(x[j], p.lower[j]), p.upper[j]);
  return x;
}

// Central differences; the step stays inside the box so the law is never evaluated out of range.
Eigen::MatrixXd jacobian(const HuberProblem& p, const Vec& x) {
  Eigen::MatrixXd J(p.n_residuals, p.n_params);
  for (int j = 0; j < p.n_params; ++j) {
    const double h = 1e-6 * std::max(1.0, std::abs(x[j]));
    Vec xp = x, xm = x;
    xp[j] = std::min(x[j] + h, p.upper[j]);
    xm[j] = std::max(x[j] - h, p.lower[j]);
    const double span = xp[j] - xm[j];
    for (int i = 0; i < p.n_residuals; ++i)
      J(i, j) = span > 0 ? (p.residual(xp.data(), i) - p.residual(xm.data(), i)) / span : 0.0;
  }
  return J;
}

}  // namespace

HuberSolution solve_huber_eigen_lm(const HuberProblem& p, std::vector<double> x0) {
  Vec x = clamp_to_box(p, Eigen::Map<Vec>(x0.data(), p.n_params));
  Vec r = all_residuals(p, x);
  double cost = total_cost(p, r);
  HuberSolution s;
  double lambda = 1e-3;
  for (s.iterations = 0; s.iterations < p.max_iterations; ++s.iterations) {
    if (!std::isfinite(cost)) {
      s.message = "loss became non-finite";
      break;
    }
    Vec w(p.n_residuals);
    for (int i = 0; i < p.n_residuals; ++i)
      w[i] = std::abs(r[i]) <= p.huber_delta ? 1.0 : p.huber_delta / std::abs(r[i]);
    const Eigen::MatrixXd J = jacobian(p, x);
    const Eigen::MatrixXd H = J.transpose() * w.asDiagonal() * J;
    const Vec g = J.transpose() * w.asDiagonal() * r;
    if (g.lpNorm<Eigen::Infinity>() < 1e-14 * std::max(1.0, cost)) {
      s.converged = true;
      s.message = "gradient below tolerance";
      break;
    }
    bool accepted = false;
    while (lambda < 1e16) {
      Eigen::MatrixXd A = H;
      for (int j = 0; j < p.n_params; ++j) A(j, j) += lambda * std::max(H(j, j), 1e-12);
      const Vec step = A.ldlt().solve(-g);
      const Vec x_new = clamp_to_box(p, x + step);
      const Vec r_new = all_residuals(p, x_new);
      const double cost_new = total_cost(p, r_new);
      if (std::isfinite(cost_new) && cost_new < cost) {
        const double rel_decrease = (cost - cost_new) / std::max(cost, 1e-300);
        const double rel_step = (x_new - x).norm() / std::max(1.0, x.norm());
        x = x_new;
        r = r_new;
        cost = cost_new;
        lambda = std::max(lambda / 3, 1e-12);
        accepted = true;
        if (rel_decrease < 1e-12 || rel_step < 1e-12) {
          s.converged = true;
          s.message = "relative cost decrease below tolerance";
        }
        break;
      }
      lambda *= 4;
    }
    if (s.converged) break;
    if (!accepted) {
      // No downhill step at any damping: a (possibly constrained) minimum of the local model.
      s.converged = true;
      s.message = "no further descent at maximal damping";
      break;
    }
  }
  if (!s.converged && s.message.empty())
    s.message = "reached the iteration limit (" + std::to_string(p.max_iterations) + ")";
  s.x.assign(x.data(), x.data() + x.size());
  s.cost = cost;
  return s;
}
#else
HuberSolution solve_huber_eigen_lm(const HuberProblem&, std::vector<double>) {
  throw std::runtime_error("this build has neither Ceres nor Eigen: `nibble law fit` is unavailable; "
                           "install libceres-dev or libeigen3-dev and rebuild");
}
#endif

}  // namespace nibble::law::detail
