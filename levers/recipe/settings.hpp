// The settings every training recipe has, declared once here as parameter
// handles (param.hpp) and taken by a builder step: .training({...}) declares
// the loop's and the data's (steps, lr, ..., batch_size, seed, eval_every,
// checkpoint_every), .lora({...}) LoRA's, .activation_checkpointing() its
// switch. A recipe reads them as it reads its own: cfg[settings::seed].
#pragma once

#include "levers/recipe/param.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace levers::settings {

// The framework loop's: the defaults here are fallbacks, each recipe's come from .training({...}).
inline const Param<long> steps{"steps", 1000, "optimizer steps", at_least(1)};
inline const Param<double> lr{"lr", 1e-3, "peak learning rate (warmup, then cosine decay)", at_least(0)};
inline const Param<long> warmup{"warmup", 0, "warmup steps", at_least(0)};
inline const Param<double> weight_decay{"weight_decay", 0.0,
                                        "AdamW's decoupled weight decay, on the parameters that decay", at_least(0)};
inline const Param<double> grad_clip{"grad_clip", 1.0, "global gradient-norm limit (0: off)", at_least(0)};
inline const Param<long> log_every{"log_every", 0, "steps per progress line (0: a twentieth of the steps)",
                                   at_least(0)};
inline const Param<int> zero{"zero", 0, "0: data parallel; 1: ZeRO-1 (AdamW's state sharded over ranks); 2: ZeRO-2 "
                             "(and the averaged gradients)", between(0, 2)};
inline const Param<long> batch_size{"batch_size", 8, "samples per micro-batch and rank", at_least(1)};
inline const Param<long> global_batch{"global_batch", 0, "if > 0: samples per micro-batch over all ranks, split "
                                      "evenly (batch_size ignored): the same on any rank count, resumed runs "
                                      "included. Without it a run resumed on more ranks keeps its global batch by "
                                      "taking fewer micro-batches per step, down to one (a micro-batch is never "
                                      "split)", at_least(0)};
inline const Param<long> grad_accum{"grad_accum", 1, "micro-batches per optimizer step", at_least(1)};
inline const Param<std::uint64_t> seed{"seed", 1, "initialisation and data-order seed", at_least(0)};
inline const Param<long> eval_every{"eval_every", 0, "steps between evaluations (0: at the end only)", at_least(0)};
inline const Param<long> checkpoint_every{"checkpoint_every", 0,
                                          "steps between training checkpoints in the run directory (0: none)",
                                          at_least(0)};
inline const Param<bool> checkpointing{"checkpointing", false, "recompute each block's activations during backward: "
                                       "less memory, one more forward per block"};

// LoRA's (.lora({...})).
inline const Param<int> lora_r{"lora_r", 8, "adapter rank (0: fine-tune every weight)", at_least(0)};
inline const Param<double> lora_alpha{"lora_alpha", 16.0,
                                      "adapter scale numerator: updates are scaled by lora_alpha / lora_r", at_least(0)};
inline const Param<std::string> lora_targets{"lora_targets", "all-linear",
                                             "the layers adapters go on: names or their last parts, comma-separated "
                                             "(q_proj,v_proj); all-linear, every Linear but lm_head"};
// QLoRA's, declared with LoRA's and by the recipes that only read a model (eval_lm, sample, chat).
inline const Param<std::string> quantize{"quantize", "", "hold the base's Linear weights in 4 bits as they load: "
                                         "nf4 or fp4, as bitsandbytes (QLoRA: adapters train on top); empty: as "
                                         "stored"};
inline const Param<bool> double_quant{"double_quant", true, "with quantize=: the blocks' scales held in 8 bits too "
                                      "(about 4.13 bits a weight instead of 4.5)"};
inline const Param<bool> save_quantized{"save_quantized", false, "save the merged model's Linear weights in 4 bits "
                                        "as bitsandbytes does (quantize='s type, nf4 without it), not in full "
                                        "precision"};

// A mixture of experts' (mixtral, qwen3_moe), declared with LoRA's.
inline const Param<bool> train_router{"train_router", true, "a mixture of experts' routers learn: whole weights "
                                      "beside LoRA's adapters (in the adapter as PEFT's modules_to_save), or with "
                                      "every weight (lora_r=0); false: frozen"};
inline const Param<std::string> router{"router", "", "a mixture of experts' router losses, comma-separated: "
                                       "aux:COEF, the load-balancing loss's weight (default: config.json's "
                                       "router_aux_loss_coef where it sets output_router_logits, else 0); z:COEF, "
                                       "the router z-loss's (default 0)"};

}  // namespace levers::settings
