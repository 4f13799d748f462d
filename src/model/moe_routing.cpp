#include "model/moe_routing.h"

#include <algorithm>

#include "kernels/ops/ops.h"

namespace infer::model {

RouterMargin route_row(float* p, int NE, int K, int* chosen, float* weights) {
  kernels::softmax(p, NE);
  for (int j = 0; j < K; ++j) {  // the K largest, the lower index first among equals
    int best = -1;
    for (int e = 0; e < NE; ++e) {
      if (std::find(chosen, chosen + j, e) != chosen + j) continue;
      if (best < 0 || p[e] > p[best]) best = e;
    }
    chosen[j] = best;
  }
  float first_unchosen = 0.f;
  for (int e = 0; e < NE; ++e) {
    if (std::find(chosen, chosen + K, e) == chosen + K) first_unchosen = std::max(first_unchosen, p[e]);
  }
  float sum = 0.f;
  for (int j = 0; j < K; ++j) sum += p[chosen[j]];
  sum = std::max(sum, 6.103515625e-5f);
  for (int j = 0; j < K; ++j) weights[j] = p[chosen[j]] / sum;
  return {p[chosen[K - 1]], first_unchosen};
}

}  // namespace infer::model
