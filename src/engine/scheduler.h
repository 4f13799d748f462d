// The step loop of the serving engine: one thread admits queued requests, runs ONE forward pass per step
// over every running sequence's next rows (a decode row per generating sequence plus prefill chunks under
// the per-step token budget), samples, streams and finishes requests. Sequences join and leave between
// steps (continuous batching with chunked prefill). Each generated token goes through a DecodeStep
// (decode_step.h), as in the CLI's Generator, so both give the same text.
//
// KV admission (why it cannot deadlock): a request is admitted only when every page it can ever need,
// ceil(min(prompt + max_tokens, context) / page_tokens), is allocated at once (after reusing its cached
// prefix and evicting unlocked cache pages). A running sequence therefore never waits for a page, always
// finishes, and returns its pages; two half-admitted sequences cannot exist. The queue is strict FIFO
// within a priority: a head that does not fit yet waits for pages, nothing overtakes it.
//
// Prefix cache: at admission the longest cached prefix, in whole pages and leaving at least the last
// prompt token to compute (its logits start generation), is locked and reused; the rest of the prompt,
// including a partial last page, is computed into private pages. On completion (any finish but Error)
// the sequence's computed tokens, whole pages only, are inserted into the tree. A mean-pooled embedding
// skips the match: it needs every prompt position's hidden state, and cached positions have none; it
// still inserts its pages afterwards (the tree keeps its own pages for prefixes it already holds).
//
// Embeddings are prefill-only sequences whose rows ask the forward pass for hidden states, never logits
// (the last row for Last pooling, every row for Mean); the states are summed per sequence in position
// order across prefill chunks, and the request finishes in the step that computes its last prompt row.
//
// The forward pass and the KV pages belong to a model::Backend (the CPU or a GPU): the scheduler sees
// page numbers only.
//
// Threads: submit(), stats(), request_flush() are thread-safe and never wait on inference. Everything
// else, including every user callback, runs on the scheduler thread.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "engine/admission_queue.h"
#include "engine/engine.h"
#include "engine/latency_window.h"
#include "engine/page_allocator.h"
#include "engine/radix_tree.h"
#include "kernels/runtime/thread_pool.h"
#include "model/backend.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace infer::engine {

using Clock = std::chrono::steady_clock;

struct Handle::State {
  uint64_t id = 0;
  std::atomic<bool> cancelled{false};
};

// A validated request waiting for admission: prompt tokenised, limits resolved.
struct PendingRequest {
  std::shared_ptr<Handle::State> handle;
  Request req;            // prompt_ids filled in
  Callbacks cb;
  int max_len = 0;        // min(prompt + max_tokens, context): the sequence ends at this many tokens
  int pages_needed = 0;   // ceil(max_len / page_tokens)
  Clock::time_point submitted;
};

class Scheduler {
 public:
  // All referenced objects must outlive the Scheduler. `opts` are the engine's resolved options;
  // `backend` takes step_tokens + max_running rows a pass. Starts the scheduler thread.
  Scheduler(const model::Model& model, const tokenizer::Tokenizer& tok, kernels::ThreadPool& pool,
            model::Backend& backend, const EngineOptions& opts);
  // Finishes everything queued or running with Cancelled, frees all pages, joins the thread.
  ~Scheduler();

  // Queues the request, or returns Busy when the queue is full. Never blocks on inference.
  std::optional<SubmitError> submit(std::unique_ptr<PendingRequest>& p);
  EngineStats stats() const;
  LatencySummary latency() const;
  // Asks the loop to drop every unlocked cache page before its next step; returns at once.
  void request_flush();

 private:
  struct Sequence;
  struct Reservation {
    RadixTree::Match match;
    std::vector<int32_t> pages;  // the whole page table: matched pages then fresh ones
  };

  void loop();
  void step();
  void expire_queued();
  void expire_running();
  void admit();
  std::optional<Reservation> reserve(const PendingRequest& p);
  bool build_batch();
  void process_outputs();
  struct Draw {  // one sequence's sampled token of this step, drawn on the compute pool
    int32_t id = -1;
    std::string error;  // what sampling threw, if it did
  };
  void sample_all();
  void take_draw(Sequence& s, const Draw& d);
  void finish_embedding(Sequence& s);
  bool uses_prefix_cache(const Request& req) const;
  void finish(Sequence& s, FinishReason why, std::string error = {});
  void finish_queued(std::unique_ptr<PendingRequest>& p, FinishReason why);
  void fail_batch(const std::string& error);
  void publish_stats();
  int retry_after_ms() const;

  const model::Model& model_;
  const tokenizer::Tokenizer& tok_;
  kernels::ThreadPool& pool_;  // sampling runs on it
  model::Backend& backend_;
  const EngineOptions opts_;
  const int n_vocab_, n_embd_;
  const int page_tokens_;

  // Scheduler-thread state.
  PageAllocator pages_;
  RadixTree tree_;
  std::vector<std::unique_ptr<Sequence>> running_;  // admission order
  model::Batch batch_;
  std::vector<Sequence*> batch_seqs_;    // batch_.seqs[i] belongs to batch_seqs_[i]
  std::vector<int> batch_rows_;          // rows each batch sequence got this step
  std::vector<Sequence*> logit_seqs_;    // owner of each logits row, in row order
  std::vector<std::pair<Sequence*, int>> hidden_rows_;  // owner and position of each hidden-only row
                                                        // (embeddings), in row order
  bool decode_only_ = false;             // this step's rows are all decode rows (profiled steps)
  std::vector<float> logits_, hidden_;
  std::vector<Draw> draws_;      // per logits row
  std::vector<size_t> to_draw_;  // logits rows whose sequence samples this step
  EngineStats local_;                    // counters, copied into stats_ once per step
  Clock::time_point window_start_;       // decode throughput window
  uint64_t window_tokens_ = 0;

  // Shared with other threads.
  AdmissionQueue<std::unique_ptr<PendingRequest>> queue_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::atomic<bool> flush_requested_{false};
  mutable std::mutex stats_mu_;
  LatencyWindow latency_;                // guarded by stats_mu_
  EngineStats stats_;
  Clock::time_point last_token_time_;
  std::atomic<uint64_t> rejected_busy_{0};
  std::atomic<double> service_ms_ema_{0};  // admission → done, for Busy retry hints
  std::thread thread_;
};

}  // namespace infer::engine
