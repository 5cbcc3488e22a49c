// Everything a model is written with, in one include: the modules (layers,
// containers, attention, LoRA) and the differentiable ops on tensors.
#pragma once

#include "framework/core/autograd.hpp"
#include "framework/nn/attention.hpp"
#include "framework/nn/containers.hpp"
#include "framework/nn/gradcheck.hpp"
#include "framework/nn/layers.hpp"
#include "framework/nn/lora.hpp"
#include "kernels/attention.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/dropout.hpp"
#include "kernels/embedding.hpp"
#include "kernels/flash_attention.hpp"
#include "kernels/gelu.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/linear.hpp"
#include "kernels/linear_cross_entropy.hpp"
#include "kernels/linear_gelu.hpp"
#include "kernels/lora.hpp"
#include "kernels/residual.hpp"
