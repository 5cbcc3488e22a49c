#include "levers/kernels/lora.hpp"

#include "levers/kernels/cpu/eigen_maps.hpp"

namespace levers::kernels::cpu {

template <class T>
void lora_forward(T* out, T* u, const T* in, const T* a, const T* b, index_t n, index_t in_dim, index_t out_dim,
                  index_t rank, T scale) {
    MatMap<T> um(u, n, rank);
    um.noalias() = ConstMatMap<T>(in, n, in_dim) * ConstMatMap<T>(a, rank, in_dim).transpose();
    MatMap<T>(out, n, out_dim).noalias() += scale * (um * ConstMatMap<T>(b, out_dim, rank).transpose());
}

template <class T>
void lora_backward(T* d_in, T* d_a, T* d_b, T* du, const T* d_out, const T* in, const T* u, const T* a, const T* b,
                   index_t n, index_t in_dim, index_t out_dim, index_t rank, T scale) {
    ConstMatMap<T> dy(d_out, n, out_dim);
    MatMap<T>(d_b, out_dim, rank).noalias() += scale * (dy.transpose() * ConstMatMap<T>(u, n, rank));
    MatMap<T> dum(du, n, rank);
    dum.noalias() = scale * (dy * ConstMatMap<T>(b, out_dim, rank));
    MatMap<T>(d_a, rank, in_dim).noalias() += dum.transpose() * ConstMatMap<T>(in, n, in_dim);
    if (d_in) MatMap<T>(d_in, n, in_dim).noalias() += dum * ConstMatMap<T>(a, rank, in_dim);
}

template <class T>
void lora_merge(T* weight, const T* a, const T* b, index_t in_dim, index_t out_dim, index_t rank, T scale) {
    MatMap<T>(weight, out_dim, in_dim).noalias() +=
        scale * (ConstMatMap<T>(b, out_dim, rank) * ConstMatMap<T>(a, rank, in_dim));
}

#define LEVERS_LORA(T)                                                                                          \
    template void lora_forward<T>(T*, T*, const T*, const T*, const T*, index_t, index_t, index_t, index_t, T); \
    template void lora_backward<T>(T*, T*, T*, T*, const T*, const T*, const T*, const T*, const T*, index_t,   \
                                   index_t, index_t, index_t, T);                                              \
    template void lora_merge<T>(T*, const T*, const T*, index_t, index_t, index_t, T);
LEVERS_LORA(float)
LEVERS_LORA(double)

namespace {
template <class T> void lora(const LoraCall& c) {
    const index_t rank = c.a.shape[0], in_dim = c.a.shape[1], out_dim = c.b.shape[0];
    lora_forward(c.out.as<T>(), c.u.as<T>(), c.in.as<T>(), c.a.as<T>(), c.b.as<T>(), c.in.shape.rows(), in_dim,
                 out_dim, rank, static_cast<T>(c.scale));
}
template <class T> void lora_grad(const LoraBackwardCall& c) {
    const index_t rank = c.a.shape[0], in_dim = c.a.shape[1], out_dim = c.b.shape[0];
    lora_backward(c.d_in.as<T>(), c.d_a.as<T>(), c.d_b.as<T>(), c.du.as<T>(), c.d_out.as<T>(), c.in.as<T>(),
                  c.u.as<T>(), c.a.as<T>(), c.b.as<T>(), c.in.shape.rows(), in_dim, out_dim, rank,
                  static_cast<T>(c.scale));
}
LEVERS_KERNEL(LoraCall, cpu, f32, lora<float>);
LEVERS_KERNEL(LoraCall, cpu, f64, lora<double>);
LEVERS_KERNEL(LoraBackwardCall, cpu, f32, lora_grad<float>);
LEVERS_KERNEL(LoraBackwardCall, cpu, f64, lora_grad<double>);
}  // namespace

}  // namespace levers::kernels::cpu
