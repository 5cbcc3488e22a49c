// Row-major Eigen views over raw pointers, shared by the CPU kernels.
#pragma once

#include <Eigen/Core>

namespace levers::kernels::cpu {

template <class T> using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T> using MatMap = Eigen::Map<RowMat<T>>;
template <class T> using ConstMatMap = Eigen::Map<const RowMat<T>>;
template <class T> using RowVecMap = Eigen::Map<Eigen::Matrix<T, 1, Eigen::Dynamic>>;
template <class T> using ConstRowVecMap = Eigen::Map<const Eigen::Matrix<T, 1, Eigen::Dynamic>>;
template <class T> using ColVecMap = Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, 1>>;
template <class T> using ConstColVecMap = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, 1>>;
// A matrix whose rows are `stride` elements apart (e.g. one head inside a wider row).
template <class T> using StridedMap = Eigen::Map<RowMat<T>, 0, Eigen::OuterStride<>>;
template <class T> using ConstStridedMap = Eigen::Map<const RowMat<T>, 0, Eigen::OuterStride<>>;

}  // namespace levers::kernels::cpu
