#include "redis/command_docs.h"

#include <cstring>

namespace infer::redis {
namespace {

// Generation options shared by INFER.GENERATE and INFER.RAG.
#define INFER_GENERATION_OPTIONS                                                                            \
  "[TOOLS tools:string [TOOLCHOICE choice:string]] [CHATARGS json:string] [TEMPLATE template:string] "      \
  "[MAXTOKENS count:integer] [TEMP temperature:double] [TOPK k:integer] [TOPP p:double] [MINP p:double] "   \
  "[REPEAT-PENALTY penalty:double] [SEED seed:integer] [STOP stop:string]... [TIMEOUT ms:integer] "         \
  "[LOGPROBS count:integer] [{FORMAT JSON | JSONSCHEMA schema:string | GRAMMAR gbnf:string}] [WITHSTATS] "

// The semantic cache (key spec 2 of both commands).
#define INFER_CACHE_OPTIONS "[CACHE key:key@2 [THRESHOLD similarity:double] [TTL seconds:integer] [SAMPLED]]"

const CommandDoc kDocs[] = {
    {"infer.load", "O(1) on the main thread; the model is read on a background thread",
     "name:string path:string [THREADS count:integer] [QUEUE depth:integer] [MAX-RUNNING count:integer] "
     "[CONTEXT tokens:integer] [WEIGHTS {COPY | MMAP}] [DEVICE {CPU | CUDA}] [GPU-LAYERS layers:string] "
     "[VRAM-BUDGET bytes:integer] [KV-TYPE {F16 | Q8_0 | Q4_0}]"},
    {"infer.unload", "O(1); the engine is freed off the main thread", "name:string"},
    {"infer.models", "O(N) with N the models loaded", ""},
    {"infer.info", "O(1)", "name:string"},
    {"infer.stats", "O(M) with M the models loaded, plus a sort of up to 1024 latencies per metric", "[name:string]"},
    {"infer.tokenize", "O(N) with N the text's bytes, off the main thread unless inside MULTI or a script",
     "model:string text:string [NOSPECIAL] [NOBOS] [STORE key:key@0]"},
    {"infer.detokenize", "O(N) with N the ids", "model:string {id:integer... | KEY key:key@0}"},
    {"infer.generate", "O(1) on the main thread (O(N) to copy N tokens from keys); generation runs on the model's threads",
     "model:string {text:string | PROMPT text:string | TOKENS key:key@0... [PROMPT suffix:string] | "
     "CHAT (role:string text:string)... | MESSAGES json:string} " INFER_GENERATION_OPTIONS "[STREAM key:key@1] "
     INFER_CACHE_OPTIONS " [EMBEDDER model:string]"},
    {"infer.streamstate", "O(1)", "key:key@0 {OPEN tokens:integer | DONE}"},
    {"infer.vadd", "O(log(N)) with N the elements, bounded per insert; with CAS the search runs on the search threads",
     "key:key@0 [REDUCE dim:integer] {FP32 vector:string | VALUES count:integer value:double...} element:string "
     "[CAS] [{NOQUANT | Q8 | BIN}] [EF ef:integer] [SETATTR json:string] [M m:integer]"},
    {"infer.vrem", "O(log(N)) with N the elements, bounded per removal", "key:key@0 element:string"},
    {"infer.vsetattr", "O(1) plus the attribute's size", "key:key@0 element:string json:string"},
    {"infer.vsim", "O(log(N)) with N the elements (O(N) with TRUTH); large searches run on the search threads",
     "key:key@0 {ELE element:string | FP32 vector:string | VALUES count:integer value:double...} [WITHSCORES] "
     "[WITHATTRIBS] [COUNT count:integer] [EPSILON delta:double] [EF ef:integer] [FILTER expression:string] "
     "[FILTER-EF ef:integer] [TRUTH] [NOTHREAD]"},
    {"infer.vemb", "O(1)", "key:key@0 element:string [RAW]"},
    {"infer.vgetattr", "O(1)", "key:key@0 element:string"},
    {"infer.vcard", "O(1)", "key:key@0"},
    {"infer.vdim", "O(1)", "key:key@0"},
    {"infer.vinfo", "O(1)", "key:key@0"},
    {"infer.vismember", "O(1)", "key:key@0 element:string"},
    {"infer.vrandmember", "O(N) with N the count (a reply of at most 65536 names and 4 MiB)", "key:key@0 [count:integer]"},
    {"infer.vrange", "O(log(N) + M) with M the names returned (a reply of at most 65536 names and 4 MiB)",
     "key:key@0 start:string end:string [count:integer]"},
    {"infer.vlinks", "O(M) with M the element's links", "key:key@0 element:string [WITHSCORES]"},
    {"infer.embed", "O(1) on the main thread; the text is embedded on the model's threads",
     "model:string text:string [POOLING {LAST | MEAN | CLS}] [NORMALIZE] [ARRAY] "
     "[STORE key:key@0 element:string [SETATTR json:string]]"},
    {"infer.rag", "O(log(N)) search with N the set's elements, plus O(T) to copy T document tokens; generation runs on the model's threads",
     "model:string vset:key@0 {QUERY text:string | FP32 vector:string | VALUES count:integer value:double...} "
     "[QUESTION text:string] [COUNT count:integer] [EF ef:integer] [FILTER expression:string] [FILTER-EF ef:integer] "
     "[DOCKEY attribute:string] [EMBEDDER model:string] " INFER_GENERATION_OPTIONS "[STREAM key:key@1] "
     INFER_CACHE_OPTIONS " [WITHSOURCES]"},
};

#undef INFER_GENERATION_OPTIONS
#undef INFER_CACHE_OPTIONS

}  // namespace

std::span<const CommandDoc> command_docs() { return kDocs; }

const CommandDoc* find_command_doc(const char* name) {
  for (const CommandDoc& d : kDocs)
    if (std::strcmp(d.name, name) == 0) return &d;
  return nullptr;
}

}  // namespace infer::redis
