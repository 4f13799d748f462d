// Short documents in stories260K's world, for the retrieval tests (INFER.EMBED ... STORE, INFER.RAG):
// each names different things, so a query made of one of them finds it first.
#pragma once
#include <string>
#include <vector>

namespace infer::test {

inline const std::vector<std::string> kStoryDocuments = {
    "Lily had a red ball. She played with it in the park every day.",
    "Tom saw a big dog. The dog was friendly and wagged its tail.",
    "The sun was hot. Sara went to the beach to swim in the sea.",
    "Ben liked to eat apples. His mom gave him a green apple.",
    "A little bird sang a song in the tree.",
};

}  // namespace infer::test
