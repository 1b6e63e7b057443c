// Robust least squares for the law fit: minimise sum_i rho(r_i(x)) with the Huber rho (quadratic
// within delta, linear outside, Ceres' convention rho(s) = s for s <= delta^2). Two back ends share
// one problem description: Ceres Solver when the build has it, and a small Eigen Levenberg-Marquardt
// with iteratively reweighted residuals as the labelled fallback (the GPU machine has no Ceres).
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace nibble::law::detail {

struct HuberProblem {
  int n_params = 0;
  int n_residuals = 0;
  std::function<double(const double* x, int i)> residual;  // residual i at parameters x
  double huber_delta = 1e-4;
  std::vector<double> lower, upper;  // box bounds per parameter (required, size n_params)
  int max_iterations = 400;
};

struct HuberSolution {
  std::vector<double> x;
  double cost = 0;  // sum of rho at x
  bool converged = false;
  int iterations = 0;
  std::string message;  // why the solver stopped, for "did not converge" errors
};

enum class Backend { ceres, eigen_lm };

bool backend_available(Backend b);
std::string backend_name(Backend b);
// Ceres when built with it, otherwise the Eigen fallback; throws std::runtime_error when neither is.
Backend default_backend();

HuberSolution solve_huber(const HuberProblem& p, std::vector<double> x0, Backend b);

// Shared by both back ends (and the tests): the Huber rho of one residual.
double huber_rho(double r, double delta);

}  // namespace nibble::law::detail
