// A mixture-of-experts row's routing (spec architectures-more.md §3.3), shared by every backend: the
// router's softmax, its n_expert_used most probable experts, their probabilities renormalised.
#pragma once

#include "model/model.h"

namespace infer::model {

// `probs`: the row's n_expert router logits, turned into probabilities in place. Writes the K chosen
// experts (most probable first, the lower index first among equals) and their weights; returns the
// margin between the last chosen and the first unchosen expert.
RouterMargin route_row(float* probs, int n_expert, int k, int* chosen, float* weights);

}  // namespace infer::model
